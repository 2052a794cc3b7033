"""Server records, their connection configs, and their on-disk (camelCase JSON) form.

A :class:`McpServerRecord` is one configured MCP server as the registry, the store and the
CLI see it: who it is (``id``, ``name``), how to reach it (``type`` + :class:`ServerConfig`)
and how to treat it (``is_active``, ``is_trusted``, ``disabled_tools`` …). Records are frozen
values; a change is a new record (see :meth:`McpServerRecord.updated`).

On disk (``mcp-config.json``) and in every JSON a user hands us, the keys are camelCase, as in
the reference design::

    {"version": 1, "mcpServers": [
      {"id": "mcp_1717000000000_k3j9x0a1b", "name": "github", "type": "stdio", "scope": "user",
       "config": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
                  "env": {"GITHUB_TOKEN": "..."}},
       "isActive": true, "isTrusted": false, "disabledTools": [], "disabledAutoApproveTools": [],
       "installSource": "manual", "projectPath": null,
       "createdAt": "2025-06-01T12:00:00.123456Z", "updatedAt": "2025-06-01T12:00:00.123456Z"}]}

The translation is done by :data:`converter`, a cattrs converter owned by this package (never
the global one). It is strict: wrong types are not coerced, unknown keys are rejected (a typo
such as ``isActve`` would otherwise be dropped silently and then lost on the next save), and
every problem becomes one :class:`~mcp_actors.errors.InvalidServerConfig` that names the
server and the camelCase path of each bad field (``config.connectTimeout``) and says what is
expected. ``config`` keys that hold their default are left out when writing, so a file stays
short and readable; reading fills the defaults back in, so every valid record round-trips
exactly.

Timestamps are timezone-aware :class:`~datetime.datetime` objects in UTC, written as ISO-8601
with a ``Z`` suffix (microseconds kept, so the round trip is exact). Reading also accepts the
reference design's epoch milliseconds and any ISO-8601 offset (converted to UTC).

Secrets: ``env`` and ``headers`` values are held in a :class:`SecretMap`, whose ``repr``
shows the keys and ``'***'`` for every value; URLs are shown with user info and query
redacted (:func:`redact_url`). No error message built here contains an env or header value.
"""

from __future__ import annotations

import datetime as _dt
import enum
import functools
import ipaddress
import math
import re
import secrets
import string
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, NoReturn, TypeVar, final

import attrs

from mcp_actors._config.redact import redact_url as redact_url
from mcp_actors._config.variables import PYTHON_PLACEHOLDER
from mcp_actors.errors import DuplicateServerName, InvalidServerConfig

__all__ = [
    "ASSERTION_GRANTS",
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_SERVER_REQUESTS",
    "DEFAULT_MAX_TOTAL_TIMEOUT",
    "DEFAULT_PING_INTERVAL",
    "DEMO_SERVER_ID",
    "DOCUMENT_VERSION",
    "InstallSource",
    "LOG_LEVELS",
    "McpServerRecord",
    "DPOP_JSON",
    "DpopMode",
    "OAuthConfig",
    "OAuthGrant",
    "Scope",
    "SecretMap",
    "ServerConfig",
    "ServerType",
    "builtin_demo_record",
    "check_name_free",
    "check_record_set",
    "first_name_clash",
    "is_loopback_host",
    "new_server_id",
    "redact_url",
]

DEFAULT_CONNECT_TIMEOUT: Final = 30.0
"""Seconds allowed for starting/connecting a server and the MCP ``initialize`` handshake."""

DEFAULT_CALL_TIMEOUT: Final = 120.0
"""Seconds allowed for one ``tools/call`` unless the call overrides it (reference design: 120 s)."""

DEFAULT_PING_INTERVAL: Final = 30.0
"""Seconds between MCP pings on an idle connection; ``0`` disables them."""

DEFAULT_MAX_TOTAL_TIMEOUT: Final = 3600.0
"""Hard bound on one tool call whose timeout progress keeps resetting, in seconds."""

DEFAULT_MAX_SERVER_REQUESTS: Final = 16
"""Requests a server may have in flight to the host at once (sampling, elicitation, roots, ping)."""

DOCUMENT_VERSION: Final = 1
"""The schema version written to, and the newest one read from, ``mcp-config.json``."""

DEMO_SERVER_ID: Final = "mcp_builtin_demo"
"""The fixed id of the built-in demo server.

Fixed (not ``mcp_{timestamp}_{random}``) because a fresh install is not written to disk until
its first change: every process that reads it must see the same record, or an id printed by
one CLI run would be unknown to the next.
"""


class ServerType(enum.StrEnum):
    """How the server is reached: a child process on stdio, SSE, or streamable HTTP."""

    STDIO = "stdio"
    SSE = "sse"
    HTTP = "http"


class OAuthGrant(enum.StrEnum):
    """How an OAuth-protected server's tokens are obtained (``config.oauth.grant``)."""

    AUTHORIZATION_CODE = "authorization_code"
    """A person logs in once (``mcp-actors auth login``, or the host's handler); refreshed after."""
    CLIENT_CREDENTIALS = "client_credentials"
    """Machine to machine: the client's own secret or signed key gets a token, no person."""
    IDENTITY_ASSERTION = "identity_assertion"
    """Enterprise-managed (SEP-990): the user's ID token from the enterprise IdP is exchanged there
    for an ID-JAG (RFC 8693), which the server's authorization server takes as a JWT-bearer grant."""
    WORKLOAD_IDENTITY = "workload_identity"
    """Workload identity federation: the platform's own JWT for this workload (a Kubernetes service
    account token, a cloud identity token) is the JWT-bearer grant (RFC 7523); no secret, no person."""


class DpopMode(enum.StrEnum):
    """When a server's access tokens are DPoP-bound (``config.oauth.dpop``: JSON ``true``, ``false`` or ``"auto"``)."""

    AUTO = "auto"
    """When the authorization server and the resource server both accept it, or the resource
    server requires it (the default; see ``docs/protocol/dpop.md``)."""
    ON = "on"
    """Always (JSON ``true``): every token request carries a proof."""
    OFF = "off"
    """Never (JSON ``false``): bearer tokens, nothing signed."""


DPOP_JSON: Final[dict[DpopMode, bool | str]] = {DpopMode.ON: True, DpopMode.OFF: False, DpopMode.AUTO: "auto"}
"""The JSON value of each :class:`DpopMode`."""


class Scope(enum.StrEnum):
    """Where a server applies: for the user everywhere, or local to one project."""

    USER = "user"
    LOCAL = "local"


class InstallSource(enum.StrEnum):
    """Who put the server into the config; builtin servers ship with mcp-actors."""

    BUILTIN = "builtin"
    MANUAL = "manual"
    PROTOCOL = "protocol"
    UNKNOWN = "unknown"


# ----------------------------------------------------------------------------- helpers


@functools.cache  # attribute names only: a few dozen; validators ask at every record read
def _camel(name: str) -> str:
    """``connect_timeout`` → ``connectTimeout``: the on-disk spelling of an attribute."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _utc_now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


_EPOCH: Final = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_ID_ALPHABET: Final = string.ascii_lowercase + string.digits


def new_server_id() -> str:
    """Return a fresh server id, ``mcp_{unix time in ms}_{9 random base-36 chars}``.

    The format is the reference design's, so ids sort by creation time and two servers added
    in the same millisecond (by two processes) still get different ids.
    """
    suffix = "".join(secrets.choice(_ID_ALPHABET) for _ in range(9))
    return f"mcp_{time.time_ns() // 1_000_000}_{suffix}"


def _type_name(value: object) -> str:
    """A JSON-flavoured name for the type of ``value`` (never the value: it may be secret)."""
    match value:
        case None:
            return "null"
        case bool():
            return "a boolean"
        case int() | float():
            return "a number"
        case str():
            return "a string"
        case Mapping():
            return "an object"
        case list() | tuple():
            return "a list"
        case _:
            return type(value).__name__


@final
class SecretMap(Mapping[str, str]):
    """An immutable ``str → str`` mapping whose ``repr`` hides the values.

    Holds ``env`` and ``headers``, which carry API keys and bearer tokens. Reading works as
    for any mapping (``m["KEY"]``, ``dict(m)``); only the ``repr`` is redacted, so printing a
    record, a config or this map never leaks a secret. Hashable, picklable, equal to any
    mapping with the same items.

    Args:
        items: A mapping or an iterable of ``(key, value)`` pairs, all strings.

    Raises:
        TypeError: A key or a value is not a string (the value itself is not shown).
    """

    __slots__ = ("_data",)

    _data: dict[str, str]

    def __init__(self, items: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        data = dict(items)
        for key, value in data.items():
            if not isinstance(key, str):
                raise TypeError(f"keys must be strings, got {_type_name(key)}")
            if not isinstance(value, str):
                raise TypeError(f"the value of {key!r} must be a string, got {_type_name(value)}")
        self._data = data

    def __getitem__(self, key: str) -> str:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return hash(frozenset(self._data.items()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._data == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{key!r}: '***'" for key in self._data) + "}"


# ----------------------------------------------------------------------------- validation
#
# One tiny validation function per field (the supervisor.erl way). Every field problem, found
# here, by the converter's structure hooks or by the config importer, is one _FieldProblem: an
# InvalidServerConfig that also carries the bare problem text and a path relative to where it
# was found, so that the layer above can prefix the full camelCase path and the server's name.


class _FieldProblem(InvalidServerConfig):
    """One field's problem: ``path`` (camelCase, relative; ``""`` is the value itself) and ``problem``.

    ``problem`` never contains an env or header value; it says what is expected.
    """

    def __init__(self, path: str, problem: str, *, server: str | None = None) -> None:
        where = f"server {server!r}: " if server else ""
        what = f"{path} {problem}" if path else problem
        super().__init__(f"{where}{what}", server=server, field=path or None)
        self.path = path
        self.problem = problem


def _fail(field: str, problem: str, *, server: str | None = None) -> NoReturn:
    raise _FieldProblem(field, problem, server=server)


_A = TypeVar("_A")
_T = TypeVar("_T")
_E = TypeVar("_E", bound=enum.StrEnum)
_Validator = Callable[[Any, "attrs.Attribute[_A]", _A], None]


def _check_text(instance: Any, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str):
        _fail(_camel(attribute.name), f"must be a string, got {_type_name(value)}")
    if not value.strip():
        _fail(_camel(attribute.name), "must not be empty")
    if "\x00" in value:
        _fail(_camel(attribute.name), "must not contain NUL characters")


_CONTROL_RE: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")
"""The control characters (Unicode category Cc: C0, DEL, C1)."""


def _check_name(instance: Any, attribute: attrs.Attribute[str], value: str) -> None:
    """The one rule for what a server name may hold, whichever way it comes in (add, rename, import, the file).

    Names are printed in tables and messages, so a control character (an escape sequence,
    a newline, a tab) would reach the terminal raw; outer whitespace would make two names
    that look alike. Both are refused, never silently changed. (``/`` and clashes with
    other names are rules of choosing a name, not of a name: ``_registry.check_new_name``.)
    """
    if isinstance(value, str) and (found := _CONTROL_RE.search(value)) is not None:
        _fail(
            "name",
            f"contains the control character U+{ord(found.group()):04X} at position {found.start()}; a server"
            " name may hold letters, digits, spaces and punctuation, but no control characters (escape"
            " sequences, newlines, tabs)",
        )
    _check_text(instance, attribute, value)
    if value != value.strip():
        _fail("name", f"must not start or end with whitespace (got {value!r}); remove it")


def _check_optional_text(instance: Any, attribute: attrs.Attribute[str | None], value: str | None) -> None:
    if value is not None:
        _check_text(instance, attribute, value)  # type: ignore[arg-type]


_ID_RE: Final = re.compile(r"[A-Za-z0-9_.-]{1,128}")


def _check_id(instance: Any, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not _ID_RE.fullmatch(value):
        _fail("id", "must be 1-128 letters, digits, '_', '-' or '.' (like 'mcp_1717000000000_k3j9x0a1b')")


_PROTOCOL_MODES: Final = ("legacy", "auto")
"""``config.protocol``: how a connection negotiates its protocol revision."""


def _check_protocol(instance: Any, attribute: attrs.Attribute[str], value: str) -> None:
    if value not in _PROTOCOL_MODES:
        shown = repr(value) if isinstance(value, str) else _type_name(value)
        _fail(
            _camel(attribute.name),
            f"must be 'legacy' (the initialize handshake) or 'auto' (server/discover first, 2026-07-28), got {shown}",
        )


def _check_bool(instance: Any, attribute: attrs.Attribute[bool], value: bool) -> None:
    if not isinstance(value, bool):
        _fail(_camel(attribute.name), f"must be true or false, got {_type_name(value)}")


def _enum_checker(enum_cls: type[enum.StrEnum]) -> _Validator[Any]:
    allowed = ", ".join(repr(member.value) for member in enum_cls)

    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if not isinstance(value, enum_cls):
            shown = repr(value) if isinstance(value, str) else _type_name(value)
            _fail(_camel(attribute.name), f"must be one of {allowed}, got {shown}")

    return check


def _to_enum(enum_cls: type[_E], value: _E | str) -> _E:
    """A valid string becomes the member; anything else is left for the validator to reject."""
    if isinstance(value, enum_cls):  # already a member (from the JSON codec): no lookup
        return value
    try:
        return enum_cls(value)
    except ValueError:
        return value  # type: ignore[return-value]  # rejected by the validator with a clear message


# attrs converters (named functions, so that mypy's attrs plugin can type __init__).
def _to_server_type(value: ServerType | str) -> ServerType:
    return _to_enum(ServerType, value)


def _to_scope(value: Scope | str) -> Scope:
    return _to_enum(Scope, value)


def _to_install_source(value: InstallSource | str) -> InstallSource:
    return _to_enum(InstallSource, value)


def _check_str_tuple(instance: Any, attribute: attrs.Attribute[tuple[str, ...]], value: tuple[str, ...]) -> None:
    field = _camel(attribute.name)
    if not isinstance(value, tuple):
        _fail(field, f"must be a list of strings, got {_type_name(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            _fail(f"{field}[{index}]", f"must be a string, got {_type_name(item)}")


def _to_str_tuple(value: Iterable[str]) -> tuple[str, ...]:
    """An attrs converter: any iterable of strings becomes a tuple, but one string is not split."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        return value  # type: ignore[return-value]  # rejected by _check_str_tuple
    return tuple(value)


def _to_secret_map(value: Mapping[str, str] | Iterable[tuple[str, str]]) -> SecretMap:
    if isinstance(value, SecretMap):
        return value
    try:
        return SecretMap(value)
    except (TypeError, ValueError):
        return value  # type: ignore[return-value]  # rejected by the validator, which says why


def _check_secret_map(
    key_rule: Callable[[str], str | None],
) -> _Validator[SecretMap]:
    def check(instance: Any, attribute: attrs.Attribute[SecretMap], value: SecretMap) -> None:
        field = _camel(attribute.name)
        if not isinstance(value, SecretMap):
            # Only keys and types are shown: the values may be secrets.
            if isinstance(value, Mapping):
                for key, item in value.items():
                    if not isinstance(item, str):
                        _fail(f"{field}.{key}", f"must be a string, got {_type_name(item)}")
            _fail(field, f"must be an object of string keys to string values, got {_type_name(value)}")
        for key in value:
            problem = key_rule(key)
            if problem:
                _fail(f"{field}.{key}" if key else field, problem)

    return check


def _env_key_problem(key: str) -> str | None:
    if not key:
        return "has an empty variable name"
    if "=" in key or "\x00" in key:
        return "is not a valid environment variable name (no '=' or NUL allowed)"
    return None


_HEADER_NAME_RE: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def _header_key_problem(key: str) -> str | None:
    if not _HEADER_NAME_RE.fullmatch(key):
        return "is not a valid HTTP header name"
    return None


def _check_header_values(instance: Any, attribute: attrs.Attribute[SecretMap], value: SecretMap) -> None:
    for key, header_value in value.items():
        # CR/LF would let one header smuggle in others; the value itself is never shown.
        if any(ch in header_value for ch in "\r\n\x00"):
            _fail(f"headers.{key}", "must not contain line breaks or NUL characters")


def _to_float(value: float) -> float:
    """An attrs converter: ints become floats (JSON ``30`` means ``30.0``); bools are left alone."""
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _seconds_checker(*, allow_zero: bool) -> _Validator[float]:
    rule = ">= 0" if allow_zero else "> 0"

    def check(instance: Any, attribute: attrs.Attribute[float], value: float) -> None:
        field = _camel(attribute.name)
        if not isinstance(value, float) or isinstance(value, bool):
            _fail(field, f"must be a number of seconds {rule}, got {_type_name(value)}")
        if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
            _fail(field, f"must be a finite number of seconds {rule}, got {value!r}")

    return check


def _check_url(instance: Any, attribute: attrs.Attribute[str | None], value: str | None) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        _fail("url", f"must be a string, got {_type_name(value)}")
    try:
        parts = urllib.parse.urlsplit(value)
        host = parts.hostname
    except ValueError:
        _fail("url", "must be an http:// or https:// URL, got an unparsable URL")
    if parts.scheme not in ("http", "https") or not host or any(ch.isspace() for ch in value):
        _fail("url", f"must be an http:// or https:// URL with a host, got {redact_url(value)!r}")


def _url_repr(value: str | None) -> str:
    return "None" if value is None else repr(redact_url(value))


def _to_utc(value: _dt.datetime) -> _dt.datetime:
    """An attrs converter: aware datetimes are normalised to UTC; naive ones are left for the validator."""
    if isinstance(value, _dt.datetime) and value.utcoffset() is not None:
        return value.astimezone(_dt.UTC)
    return value


def _check_timestamp(instance: Any, attribute: attrs.Attribute[_dt.datetime], value: _dt.datetime) -> None:
    if not isinstance(value, _dt.datetime) or value.utcoffset() is None:
        _fail(
            _camel(attribute.name),
            "must be a timezone-aware datetime (ISO-8601 with 'Z' or an offset, or epoch milliseconds)",
        )


# ----------------------------------------------------------------------------- oauth

SIGNING_ALGORITHMS: Final = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
"""The JWT algorithms ``config.oauth.signingAlgorithm`` accepts for ``private_key_jwt``."""

ASSERTION_GRANTS: Final = frozenset({OAuthGrant.IDENTITY_ASSERTION, OAuthGrant.WORKLOAD_IDENTITY})
"""The grants whose token request carries an assertion (RFC 7523 ``jwt-bearer``) instead of a code or a secret."""


def _to_grant(value: OAuthGrant | str) -> OAuthGrant:
    return _to_enum(OAuthGrant, value)


def _check_client_metadata_url(instance: Any, attribute: attrs.Attribute[str | None], value: str | None) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        _fail("clientMetadataUrl", f"must be a string, got {_type_name(value)}")
    try:
        parts = urllib.parse.urlsplit(value)
    except ValueError:
        _fail("clientMetadataUrl", "must be an https:// URL, got an unparsable URL")
    if parts.scheme != "https" or not parts.hostname or parts.path in ("", "/"):
        _fail(
            "clientMetadataUrl",
            f"must be an https:// URL with a path (a Client ID Metadata Document), got {redact_url(value)!r}",
        )


def is_loopback_host(host: str | None) -> bool:
    """Whether ``host`` names this machine (``localhost``, ``127.0.0.0/8``, ``::1``).

    The one place plain http may carry credentials: nothing leaves the machine.
    """
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_secure_url(instance: Any, attribute: attrs.Attribute[str | None], value: str | None) -> None:
    """An endpoint that receives credentials: https, or http on this machine (tests, local IdPs)."""
    if value is None:
        return
    field = _camel(attribute.name)
    if not isinstance(value, str):
        _fail(field, f"must be a string, got {_type_name(value)}")
    try:
        parts = urllib.parse.urlsplit(value)
        host = parts.hostname
    except ValueError:
        _fail(field, "must be an https:// URL, got an unparsable URL")
    if (
        not host
        or parts.fragment
        or not (parts.scheme == "https" or (parts.scheme == "http" and is_loopback_host(host)))
    ):
        _fail(
            field,
            "must be an https:// URL without a fragment (plain http only on 127.0.0.1 or localhost: it carries"
            f" credentials), got {redact_url(value)!r}",
        )


def _check_token_text(instance: Any, attribute: attrs.Attribute[str | None], value: str | None) -> None:
    """One OAuth parameter value (an audience, a resource identifier): no spaces, nothing empty."""
    if value is None:
        return
    _check_text(instance, attribute, value)  # type: ignore[arg-type]
    if any(ch.isspace() for ch in value):
        _fail(_camel(attribute.name), f"must be one identifier without spaces, got {value!r}")


_ENV_NAME_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_env_name(instance: Any, attribute: attrs.Attribute[str | None], value: str | None) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not _ENV_NAME_RE.fullmatch(value):
        # The value is not shown: a token pasted here by mistake must not reach the message.
        shown = "a string that is not one" if isinstance(value, str) else _type_name(value)
        _fail(
            _camel(attribute.name),
            f"must be the name of an environment variable (letters, digits, '_'), got {shown}; name the"
            " variable that holds the token, never the token itself",
        )


def _check_scopes(instance: Any, attribute: attrs.Attribute[tuple[str, ...]], value: tuple[str, ...]) -> None:
    _check_str_tuple(instance, attribute, value)
    for index, scope in enumerate(value):
        if not scope or any(ch.isspace() or ch in '"\\' for ch in scope):
            _fail(f"scopes[{index}]", f"must be one scope token without spaces or quotes, got {scope!r}")


def _check_signing_algorithm(instance: Any, attribute: attrs.Attribute[str | None], value: str | None) -> None:
    if value is not None and value not in SIGNING_ALGORITHMS:
        shown = repr(value) if isinstance(value, str) else _type_name(value)
        _fail("signingAlgorithm", f"must be one of {', '.join(SIGNING_ALGORITHMS)}, got {shown}")


def _check_redirect_port(instance: Any, attribute: attrs.Attribute[int | None], value: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        _fail("redirectPort", f"must be a port number, got {_type_name(value)}")
    if not 1 <= value <= 65535:
        _fail("redirectPort", f"must be in 1..65535, got {value}")


def _to_dpop_mode(value: DpopMode | bool | str) -> DpopMode:
    """JSON ``true``/``false``/``"auto"`` (or a member) become the member; anything else is left for the validator."""
    if isinstance(value, DpopMode):
        return value
    for mode, json_value in DPOP_JSON.items():
        if value is json_value or (isinstance(value, str) and value == json_value):
            return mode
    return value  # type: ignore[return-value]  # rejected by the validator with a clear message


def _check_dpop(instance: Any, attribute: attrs.Attribute[DpopMode], value: DpopMode) -> None:
    if not isinstance(value, DpopMode):
        shown = repr(value) if isinstance(value, str) else _type_name(value)
        _fail("dpop", f'must be true, false or "auto", got {shown}')


def _check_server_requests(instance: Any, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        _fail("maxServerRequests", f"must be a whole number >= 1, got {_type_name(value)}")
    if value < 1:
        _fail("maxServerRequests", f"must be >= 1, got {value}")


def _check_oauth_grant(instance: OAuthConfig, attribute: attrs.Attribute[OAuthGrant], value: OAuthGrant) -> None:
    """The cross-field rules, checked last (attrs validates in field order): they need every field."""
    _enum_checker(OAuthGrant)(instance, attribute, value)
    if value is OAuthGrant.CLIENT_CREDENTIALS:
        if instance.client_id is None:
            _fail("clientId", "is required for the client_credentials grant (the client registered for this machine)")
        if instance.client_secret is None and instance.private_key_file is None:
            _fail("clientSecret", "or privateKeyFile is required for the client_credentials grant")
        if instance.client_secret is not None and instance.private_key_file is not None:
            _fail("privateKeyFile", "and clientSecret exclude each other; keep one way to authenticate")
    else:
        if instance.private_key_file is not None:
            _fail("privateKeyFile", "is only for the client_credentials grant (private_key_jwt)")
    if value is OAuthGrant.IDENTITY_ASSERTION:
        if instance.client_id is None:
            _fail(
                "clientId",
                "is required for the identity_assertion grant (the client registered with the server's"
                " authorization server; the IdP names it in the ID-JAG)",
            )
        if instance.idp_token_endpoint is None:
            _fail(
                "idpTokenEndpoint", "is required for the identity_assertion grant (where the IdP exchanges ID tokens)"
            )
        if instance.idp_client_id is None:
            _fail("idpClientId", "is required for the identity_assertion grant (this client at the enterprise IdP)")
    else:
        for name in ("idp_token_endpoint", "idp_client_id", "idp_client_secret", "audience", "resource"):
            if getattr(instance, name) is not None:
                _fail(_camel(name), "is only for the identity_assertion grant")
    if value not in ASSERTION_GRANTS:
        for name in ("issuer", "assertion_file", "assertion_env"):
            if getattr(instance, name) is not None:
                _fail(_camel(name), "is only for the identity_assertion and workload_identity grants")
    if instance.assertion_file is not None and instance.assertion_env is not None:
        _fail("assertionEnv", "and assertionFile exclude each other; keep one source of the token")
    if instance.signing_algorithm is not None and instance.private_key_file is None:
        _fail("signingAlgorithm", "is only used with privateKeyFile")
    if instance.client_secret is not None and instance.client_id is None:
        _fail("clientSecret", "needs clientId (the client the secret belongs to)")


@attrs.frozen(kw_only=True)
class OAuthConfig:
    """How to authorize with an OAuth-protected SSE or streamable-HTTP server (``config.oauth``).

    Every field is optional: an empty ``oauth`` object (or none at all) means the MCP
    authorization spec's defaults, discovery on the server's first 401 and dynamic client
    registration. Tokens are never kept here; they live in the token store (see
    :mod:`mcp_actors.auth`).

    Attributes:
        client_id: A client registered with the authorization server beforehand; preferred
            over ``client_metadata_url`` and dynamic registration.
        client_secret: Its secret (``client_secret_basic`` or ``client_secret_post``, as the
            authorization server supports). A secret: hidden from ``repr``.
        client_metadata_url: An ``https://`` Client ID Metadata Document URL, used as the
            client id where the authorization server supports it.
        scopes: Scopes to request; empty means the server's challenge, else its
            ``scopes_supported``, else none.
        grant: :attr:`OAuthGrant.AUTHORIZATION_CODE` (a person logs in),
            ``CLIENT_CREDENTIALS`` (machine to machine; needs ``client_id`` and a secret or
            ``private_key_file``), ``IDENTITY_ASSERTION`` (enterprise-managed: needs
            ``client_id``, ``idp_token_endpoint`` and ``idp_client_id``) or
            ``WORKLOAD_IDENTITY`` (the platform's JWT for this workload).
        private_key_file: PEM private key for ``private_key_jwt`` client authentication.
        signing_algorithm: Its JWT algorithm (default ``RS256``).
        issuer: The issuer of the server's authorization server, for the assertion grants: when
            set, the assertion (and the client secret) go only there, whatever the server's
            metadata names. Without it, a workload assertion is sent only to an authorization
            server its ``aud`` claim names.
        idp_token_endpoint: The enterprise IdP's token endpoint (RFC 8693 token exchange).
        idp_client_id: This client's id at the IdP.
        idp_client_secret: Its secret at the IdP (``client_secret_post``). Hidden from ``repr``.
        audience: The token exchange's ``audience``; default: the authorization server's issuer.
        resource: The token exchange's ``resource``; default: the server's resource identifier.
        assertion_file: A file holding the token: the user's ID token (identity_assertion) or
            the workload's JWT (workload_identity). Read again for every token request, so a
            platform that rotates it is followed.
        assertion_env: An environment variable holding that token, read at every token
            request. Neither: the runtime's ``assertion_handler`` is asked.
        redirect_port: Fixed loopback port for the login redirect
            (``http://127.0.0.1:PORT/callback``); ``None`` picks a free one per login.
        dpop: Whether the tokens are DPoP-bound (RFC 9449): :attr:`DpopMode.AUTO` (default)
            when both the authorization server and the resource server accept it,
            ``ON`` (JSON ``true``) always, ``OFF`` (``false``) never. The key lives in the
            token store, never here.

    Raises:
        InvalidServerConfig: A field is invalid or the fields contradict each other.
    """

    client_id: str | None = attrs.field(default=None, validator=_check_optional_text)
    client_secret: str | None = attrs.field(
        default=None, validator=_check_optional_text, repr=lambda v: "None" if v is None else "'***'"
    )
    client_metadata_url: str | None = attrs.field(default=None, validator=_check_client_metadata_url, repr=_url_repr)
    scopes: tuple[str, ...] = attrs.field(default=(), converter=_to_str_tuple, validator=_check_scopes)
    private_key_file: str | None = attrs.field(default=None, validator=_check_optional_text)
    signing_algorithm: str | None = attrs.field(default=None, validator=_check_signing_algorithm)
    issuer: str | None = attrs.field(default=None, validator=_check_secure_url, repr=_url_repr)
    idp_token_endpoint: str | None = attrs.field(default=None, validator=_check_secure_url, repr=_url_repr)
    idp_client_id: str | None = attrs.field(default=None, validator=_check_optional_text)
    idp_client_secret: str | None = attrs.field(
        default=None, validator=_check_optional_text, repr=lambda v: "None" if v is None else "'***'"
    )
    audience: str | None = attrs.field(default=None, validator=_check_token_text)
    resource: str | None = attrs.field(default=None, validator=_check_token_text)
    assertion_file: str | None = attrs.field(default=None, validator=_check_optional_text)
    assertion_env: str | None = attrs.field(default=None, validator=_check_env_name)
    redirect_port: int | None = attrs.field(default=None, validator=_check_redirect_port)
    dpop: DpopMode = attrs.field(default=DpopMode.AUTO, converter=_to_dpop_mode, validator=_check_dpop)
    grant: OAuthGrant = attrs.field(
        default=OAuthGrant.AUTHORIZATION_CODE, converter=_to_grant, validator=_check_oauth_grant
    )

    def secret_values(self) -> tuple[str, ...]:
        """The values that must never appear in any text we produce (the client secrets)."""
        return tuple(secret for secret in (self.client_secret, self.idp_client_secret) if secret)


def _check_oauth(instance: Any, attribute: attrs.Attribute[OAuthConfig | None], value: OAuthConfig | None) -> None:
    if value is not None and not isinstance(value, OAuthConfig):
        _fail("oauth", f"must be an oauth settings object, got {_type_name(value)}")


# ----------------------------------------------------------------------------- records


LOG_LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
"""The MCP log levels (RFC 5424 severities), least severe first."""


def _check_log_level(instance: Any, attribute: attrs.Attribute[str | None], value: str | None) -> None:
    if value is not None and value not in LOG_LEVELS:
        _fail(_camel(attribute.name), f"must be one of {', '.join(LOG_LEVELS)}, got {value!r}")


@attrs.frozen(kw_only=True)
class ServerConfig:
    """How to start or reach one server, and how long to wait for it.

    stdio servers use ``command``/``args``/``env``/``cwd``; SSE and streamable-HTTP servers use
    ``url``/``headers``. Which fields must be set depends on the record's ``type`` and is
    checked by :class:`McpServerRecord` (a config alone does not know its type).

    Attributes:
        command: The executable of a stdio server (``npx``, ``uvx``, a path).
        args: Its arguments.
        env: Environment variables set for the process, on top of the host's environment.
            Values are secrets: hidden from ``repr``.
        cwd: Working directory of the process; ``None`` inherits the host's.
        env_file: A dotenv file read when the process starts (``envFile``); ``env`` wins
            over it. Its values are secrets, like ``env``'s.
        url: The ``http://`` or ``https://`` endpoint of an SSE or streamable-HTTP server.
        headers: HTTP headers sent with every request (often ``Authorization``). Values are
            secrets: hidden from ``repr``.
        connect_timeout: Seconds for spawning/connecting plus the MCP handshake (> 0).
        call_timeout: Default seconds for one tool call (> 0); a call may override it.
        ping_interval: Seconds between health pings while connected; ``0`` disables them
            (the periodic ones and the one sent as soon as a call times out). An
            unanswered ping declares the server dead, unless calls sent before it are
            still within their timeouts (a server blocked in a synchronous tool answers
            nothing until it returns): then the calls' own timeouts bound the wait.
        oauth: OAuth settings of an sse/http server (:class:`OAuthConfig`); ``None`` means the
            spec's defaults when the server asks for authorization.
        allow_sampling: Let this server sample the host's model when the host offers a
            sampling handler (``allowSampling``; false: the capability is not declared to it).
        allow_elicitation: Let this server ask the user through the host's elicitation
            handler (``allowElicitation``).
        allow_roots: Let this server list the host's roots (``allowRoots``).
        protocol: ``"auto"`` (default, as the SDK's ``Client``): probe ``server/discover``
            first and speak 2026-07-28 with a server that offers it, else fall back to the
            handshake; ``"legacy"``: only the ``initialize`` handshake (2025-06-18,
            2025-11-25), e.g. for a server whose tools must run as 2025-11-25 tasks.
        reset_timeout_on_progress: A progress notification restarts a tool call's timeout
            (as desktop hosts do for long-running tools), bounded by ``max_total_timeout``.
        max_total_timeout: Hard bound, in seconds, on one tool call however much progress
            it reports (> 0).
        log_level: The MCP log level asked of the server (``debug`` … ``emergency``): sent
            as ``logging/setLevel`` on every connect (handshake revisions), or as every
            request's log opt-in at 2026-07-28; ``None`` leaves the server's default
            (at 2026-07-28: no log messages).
        max_server_requests: Requests this server may have in flight to the host at once
            (sampling, elicitation, roots, ping; ``maxServerRequests``, >= 1, default 16);
            one past it is answered at once with a JSON-RPC error, never queued.

    Raises:
        InvalidServerConfig: A field has the wrong type or value; ``field`` names it in
            camelCase (``connectTimeout``).
    """

    command: str | None = attrs.field(default=None, validator=_check_optional_text)
    args: tuple[str, ...] = attrs.field(default=(), converter=_to_str_tuple, validator=_check_str_tuple)
    env: SecretMap = attrs.field(
        factory=SecretMap, converter=_to_secret_map, validator=_check_secret_map(_env_key_problem)
    )
    cwd: str | None = attrs.field(default=None, validator=_check_optional_text)
    env_file: str | None = attrs.field(default=None, validator=_check_optional_text)
    url: str | None = attrs.field(default=None, validator=_check_url, repr=_url_repr)
    headers: SecretMap = attrs.field(
        factory=SecretMap,
        converter=_to_secret_map,
        validator=[_check_secret_map(_header_key_problem), _check_header_values],
    )
    connect_timeout: float = attrs.field(
        default=DEFAULT_CONNECT_TIMEOUT, converter=_to_float, validator=_seconds_checker(allow_zero=False)
    )
    call_timeout: float = attrs.field(
        default=DEFAULT_CALL_TIMEOUT, converter=_to_float, validator=_seconds_checker(allow_zero=False)
    )
    ping_interval: float = attrs.field(
        default=DEFAULT_PING_INTERVAL, converter=_to_float, validator=_seconds_checker(allow_zero=True)
    )
    oauth: OAuthConfig | None = attrs.field(default=None, validator=_check_oauth)
    # -- host callbacks: a record may refuse what the host offers
    allow_sampling: bool = attrs.field(default=True, validator=_check_bool)
    allow_elicitation: bool = attrs.field(default=True, validator=_check_bool)
    allow_roots: bool = attrs.field(default=True, validator=_check_bool)
    protocol: str = attrs.field(default="auto", validator=_check_protocol)
    reset_timeout_on_progress: bool = attrs.field(default=False, validator=_check_bool)
    max_total_timeout: float = attrs.field(
        default=DEFAULT_MAX_TOTAL_TIMEOUT, converter=_to_float, validator=_seconds_checker(allow_zero=False)
    )
    log_level: str | None = attrs.field(default=None, validator=_check_log_level)
    max_server_requests: int = attrs.field(default=DEFAULT_MAX_SERVER_REQUESTS, validator=_check_server_requests)


def _check_config(instance: McpServerRecord, attribute: attrs.Attribute[ServerConfig], config: ServerConfig) -> None:
    """The record-level rule: the config must fit the record's transport type."""
    server = instance.name if isinstance(instance.name, str) and instance.name.strip() else None
    if not isinstance(config, ServerConfig):
        _fail("config", f"must be a server config object, got {_type_name(config)}", server=server)
    if not isinstance(instance.type, ServerType):
        return  # reported by the type field's own validator
    if instance.type is ServerType.STDIO:
        if config.command is None:
            _fail("config.command", "is required for a stdio server (the program to run)", server=server)
        if config.url is not None:
            _fail("config.url", "is only for sse/http servers; a stdio server runs config.command", server=server)
        if config.headers:
            _fail("config.headers", "are only for sse/http servers", server=server)
        if config.oauth is not None:
            _fail("config.oauth", "is only for sse/http servers", server=server)
    else:
        if config.url is None:
            _fail(
                "config.url",
                f"is required for an {instance.type.value} server (an http:// or https:// URL)",
                server=server,
            )
        stdio_fields = (
            ("command", config.command),
            ("args", config.args),
            ("env", config.env),
            ("cwd", config.cwd),
            ("envFile", config.env_file),
        )
        stdio_only = [name for name, value in stdio_fields if value]
        if stdio_only:
            _fail(
                f"config.{stdio_only[0]}",
                f"is only for stdio servers; an {instance.type.value} server is reached at config.url",
                server=server,
            )


@attrs.frozen(kw_only=True)
class McpServerRecord:
    """One configured MCP server (DESIGN §6), as stored in ``mcp-config.json``.

    Frozen: to change a record, make a new one with :meth:`updated` (which keeps ``id`` and
    ``created_at`` and stamps ``updated_at``) or ``attrs.evolve``.

    Attributes:
        id: Stable identity, ``mcp_{timestamp_ms}_{random}`` (:func:`new_server_id`).
        name: Human name, non-empty, without control characters or outer whitespace; the
            registry keeps names unique.
        type: Transport: :attr:`ServerType.STDIO`, ``SSE`` or ``HTTP``.
        scope: :attr:`Scope.USER` (everywhere) or ``LOCAL`` (one project, see ``project_path``).
        config: How to start/reach the server; must fit ``type``.
        is_active: Disabled servers are kept but never connected.
        is_trusted: Tool calls of a trusted server are auto-approved (except
            ``disabled_auto_approve_tools``).
        disabled_tools: Tool names hidden from listings and refused on call.
        disabled_auto_approve_tools: Tool names that always need approval.
        install_source: Who added the server (:class:`InstallSource`).
        project_path: The project a ``local`` server belongs to.
        created_at: When the record was created (aware, UTC).
        updated_at: When it last changed (aware, UTC); defaults to ``created_at``.

    Raises:
        InvalidServerConfig: A field is invalid, or the config does not fit the type (a stdio
            server needs ``config.command``, sse/http need ``config.url``).
    """

    id: str = attrs.field(factory=new_server_id, validator=_check_id)
    name: str = attrs.field(validator=_check_name)
    type: ServerType = attrs.field(converter=_to_server_type, validator=_enum_checker(ServerType))
    scope: Scope = attrs.field(default=Scope.USER, converter=_to_scope, validator=_enum_checker(Scope))
    config: ServerConfig = attrs.field(validator=_check_config)
    is_active: bool = attrs.field(default=True, validator=_check_bool)
    is_trusted: bool = attrs.field(default=False, validator=_check_bool)
    disabled_tools: tuple[str, ...] = attrs.field(default=(), converter=_to_str_tuple, validator=_check_str_tuple)
    disabled_auto_approve_tools: tuple[str, ...] = attrs.field(
        default=(), converter=_to_str_tuple, validator=_check_str_tuple
    )
    install_source: InstallSource = attrs.field(
        default=InstallSource.MANUAL, converter=_to_install_source, validator=_enum_checker(InstallSource)
    )
    project_path: str | None = attrs.field(default=None, validator=_check_optional_text)
    created_at: _dt.datetime = attrs.field(factory=_utc_now, converter=_to_utc, validator=_check_timestamp)
    updated_at: _dt.datetime = attrs.field(
        default=attrs.Factory(lambda self: self.created_at, takes_self=True),
        converter=_to_utc,
        validator=_check_timestamp,
    )

    def updated(self, **changes: Any) -> McpServerRecord:
        """Return a copy with ``changes`` applied and ``updated_at`` set to now.

        This is the reference design's ``update``: the id (and the creation time) never
        change.

        Args:
            **changes: Attribute names and new values, as for ``attrs.evolve``.

        Returns:
            The new record (validated like any other).

        Raises:
            ValueError: ``changes`` tries to change ``id`` or ``created_at``.
            InvalidServerConfig: The result is not a valid record.
        """
        for frozen_field in ("id", "created_at"):
            if frozen_field in changes and changes[frozen_field] != getattr(self, frozen_field):
                raise ValueError(f"{frozen_field} of a record is immutable")
        changes.setdefault("updated_at", max(_utc_now(), self.created_at))
        return attrs.evolve(self, **changes)


def builtin_demo_record() -> McpServerRecord:
    """Return the record of the built-in demo server, the one server of a fresh install.

    It runs ``python -m mcp_actors.demo_server`` with the interpreter running mcp-actors,
    so every command works before any configuration. The command is stored as the
    symbolic ``${mcpActors:python}`` (resolved when the server starts), never as this
    interpreter's absolute path: a config written once keeps working when the virtual
    environment moves or is rebuilt. Trusted (it ships with mcp-actors) and marked
    ``installSource: builtin``. The id and timestamps are fixed (:data:`DEMO_SERVER_ID`, the
    Unix epoch) so that every read of an unwritten fresh install yields the same record.
    """
    return McpServerRecord(
        id=DEMO_SERVER_ID,
        name="demo",
        type=ServerType.STDIO,
        config=ServerConfig(command=PYTHON_PLACEHOLDER, args=("-m", "mcp_actors.demo_server")),
        is_trusted=True,
        install_source=InstallSource.BUILTIN,
        created_at=_EPOCH,
        updated_at=_EPOCH,
    )


def check_name_free(records: Sequence[McpServerRecord], name: str, own_id: str) -> None:
    """Refuse ``name`` when another record has it, or a name that cleans to the same tool-id part.

    Raises:
        DuplicateServerName: Names both servers and says what to choose.
    """
    from mcp_actors.naming import clean_name

    cleaned = clean_name(name)
    for other in records:
        if other.id != own_id and (other.name == name or clean_name(other.name) == cleaned):
            _refuse_name(name, other.name, cleaned)


def _refuse_name(name: str, other: str, cleaned: str) -> NoReturn:
    if other == name:
        raise DuplicateServerName(
            f"a server named {name!r} already exists; choose another name or update that one",
            server=name,
            field="name",
        )
    raise DuplicateServerName(
        f"server name {name!r} collides with {other!r}: both become {cleaned!r} in tool ids; choose a name"
        " that differs in letters or digits",
        server=name,
        field="name",
    )


def check_record_set(records: Sequence[McpServerRecord]) -> None:
    """The one check of a whole record set, run before any write of it (store, service, CLI).

    Every item is a record, every id is unique, every name is unique also after cleaning
    (tool ids would collide otherwise).

    Raises:
        TypeError: An item is not a :class:`McpServerRecord` (a bug of the caller).
        DuplicateServerName: Two records share an id or a name (a ``ValueError``).
    """
    seen: set[str] = set()
    for index, record in enumerate(records):
        if not isinstance(record, McpServerRecord):
            raise TypeError(f"records[{index}] must be a McpServerRecord, got {type(record).__name__}")
        if record.id in seen:
            raise DuplicateServerName(
                f"records[{index}] has id {record.id!r}, which another record already uses",
                server=record.name,
                field="id",
            )
        seen.add(record.id)
    clash = first_name_clash([record.name for record in records])
    if clash is not None:
        index, other, cleaned = clash
        _refuse_name(records[index].name, records[other].name, cleaned)


def first_name_clash(names: Sequence[str]) -> tuple[int, int, str] | None:
    """The first name of a set that an earlier one already has, or cleans like (tool ids would collide).

    The rule for a whole set of names (a write, a read of the file); :func:`check_name_free`
    applies it to one new name.

    Returns:
        ``(its index, the earlier one's index, the cleaned name)``, or ``None`` when every
        name is unique also after cleaning.
    """
    # One pass, one cleaning per name: the names before any index have distinct cleaned
    # names (else the search stopped there), so at most one of them can clash with it.
    from mcp_actors.naming import clean_name

    by_cleaned: dict[str, int] = {}
    for index, name in enumerate(names):
        cleaned = clean_name(name)
        other = by_cleaned.get(cleaned)
        if other is not None:
            return index, other, cleaned
        by_cleaned[cleaned] = index
    return None
