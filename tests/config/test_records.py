"""Server records: defaults, validation, the camelCase JSON form, and secret hygiene."""

from __future__ import annotations

import datetime as dt
import json
import pickle
import re
import sys
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_actors import records as records_module
from mcp_actors._config.codec import (
    document_from_records,
    record_from_json_dict,
    record_to_json_dict,
    records_from_document,
)
from mcp_actors._config.record import (
    DEMO_SERVER_ID,
    InstallSource,
    McpServerRecord,
    Scope,
    SecretMap,
    ServerConfig,
    ServerType,
    builtin_demo_record,
    new_server_id,
    redact_url,
)
from mcp_actors._wire.transports import StdioParams
from mcp_actors.errors import ConfigError, DuplicateServerName, InvalidServerConfig
from mcp_actors.naming import clean_name

# ----------------------------------------------------------------------------- strategies

_text = st.text(st.characters(exclude_characters="\x00"), max_size=20)
_non_empty = _text.filter(lambda s: s.strip() != "")
_names = st.text(st.characters(exclude_categories=("Cc",)), min_size=1, max_size=20).filter(
    lambda s: s.strip() == s != ""
)
_seconds = st.floats(min_value=0.001, max_value=1e6, allow_nan=False, allow_infinity=False)
_env_keys = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True)
_header_keys = st.from_regex(r"[A-Za-z][A-Za-z0-9-]{0,15}", fullmatch=True)
_header_values = st.text(st.characters(exclude_characters="\r\n\x00"), max_size=30)
_urls = st.builds(
    lambda scheme, host, path: f"{scheme}://{host}{path}",
    st.sampled_from(["http", "https"]),
    st.from_regex(r"[a-z]{1,10}(\.[a-z]{2,5})?(:[1-9][0-9]{0,3})?", fullmatch=True),
    st.from_regex(r"(/[a-z0-9_-]{0,8}){0,3}", fullmatch=True),
)
_datetimes = st.datetimes(timezones=st.just(dt.UTC))
_timeouts = st.fixed_dictionaries(
    {},
    optional={
        "connect_timeout": _seconds,
        "call_timeout": _seconds,
        "ping_interval": st.one_of(st.just(0.0), _seconds),
    },
)


@st.composite
def _configs(draw: st.DrawFn, server_type: ServerType) -> ServerConfig:
    timeouts: dict[str, Any] = draw(_timeouts)
    if server_type is ServerType.STDIO:
        return ServerConfig(
            command=draw(_non_empty),
            args=draw(st.lists(_text, max_size=4)),
            env=draw(st.dictionaries(_env_keys, _text, max_size=3)),
            cwd=draw(st.none() | _non_empty),
            env_file=draw(st.none() | _non_empty),
            **timeouts,
        )
    return ServerConfig(
        url=draw(_urls),
        headers=draw(st.dictionaries(_header_keys, _header_values, max_size=3)),
        **timeouts,
    )


@st.composite
def valid_records(draw: st.DrawFn) -> McpServerRecord:
    server_type = draw(st.sampled_from(ServerType))
    created = draw(_datetimes)
    return McpServerRecord(
        id=draw(st.from_regex(r"[A-Za-z0-9_.-]{1,40}", fullmatch=True)),
        name=draw(_names),
        type=server_type,
        scope=draw(st.sampled_from(Scope)),
        config=draw(_configs(server_type)),
        is_active=draw(st.booleans()),
        is_trusted=draw(st.booleans()),
        disabled_tools=draw(st.lists(_text, max_size=3)),
        disabled_auto_approve_tools=draw(st.lists(_text, max_size=3)),
        install_source=draw(st.sampled_from(InstallSource)),
        project_path=draw(st.none() | _non_empty),
        created_at=created,
        updated_at=draw(st.just(created) | _datetimes),
    )


def _stdio(**overrides: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": "mcp_1_a", "name": "files", "type": "stdio", "config": {"command": "npx"}}
    entry.update(overrides)
    return entry


# ----------------------------------------------------------------------------- round trip


@given(valid_records())
def test_every_valid_record_round_trips_exactly_through_json_text(record: McpServerRecord) -> None:
    """A record written to JSON text and read back is equal to the original."""
    text = json.dumps(record_to_json_dict(record), ensure_ascii=False)
    assert record_from_json_dict(json.loads(text)) == record


@settings(max_examples=25)
@given(st.lists(valid_records(), max_size=4, unique_by=(lambda r: r.id, lambda r: clean_name(r.name))))
def test_documents_round_trip(records: list[McpServerRecord]) -> None:
    """A whole document of records round-trips, in order."""
    document = json.loads(json.dumps(document_from_records(records)))
    assert document["version"] == 1
    assert records_from_document(document) == records


def test_json_form_uses_camel_case_keys_and_plain_json_values() -> None:
    """Keys are camelCase as in the reference design; enums and times are plain strings."""
    record = McpServerRecord(
        id="mcp_1_a",
        name="files",
        type=ServerType.STDIO,
        config=ServerConfig(command="npx", args=["-y", "pkg"], connect_timeout=5),
        disabled_tools=["rm"],
        created_at=dt.datetime(2025, 6, 1, 12, 0, 0, 123456, tzinfo=dt.UTC),
    )
    assert record_to_json_dict(record) == {
        "id": "mcp_1_a",
        "name": "files",
        "type": "stdio",
        "scope": "user",
        "config": {"command": "npx", "args": ["-y", "pkg"], "connectTimeout": 5.0},
        "isActive": True,
        "isTrusted": False,
        "disabledTools": ["rm"],
        "disabledAutoApproveTools": [],
        "installSource": "manual",
        "projectPath": None,
        "createdAt": "2025-06-01T12:00:00.123456Z",
        "updatedAt": "2025-06-01T12:00:00.123456Z",
    }


def test_defaults_match_the_design() -> None:
    """A minimal record gets the defaults of DESIGN §6."""
    record = McpServerRecord(name="x", type="stdio", config=ServerConfig(command="x"))
    assert record.scope is Scope.USER
    assert (record.is_active, record.is_trusted) == (True, False)
    assert record.disabled_tools == record.disabled_auto_approve_tools == ()
    assert record.install_source is InstallSource.MANUAL
    assert record.project_path is None
    assert record.updated_at == record.created_at
    assert record.created_at.tzinfo is dt.UTC
    config = record.config
    assert (config.connect_timeout, config.call_timeout, config.ping_interval) == (30.0, 120.0, 30.0)
    assert config.env == {} and config.headers == {} and config.args == ()


def test_reading_accepts_reference_epoch_millis_and_other_offsets() -> None:
    """Epoch milliseconds (the reference's Date.now()) and non-UTC offsets are read as UTC."""
    record = record_from_json_dict(_stdio(createdAt=1717000000123, updatedAt="2024-06-01T10:00:00+02:00"))
    assert record.created_at == dt.datetime(2024, 5, 29, 16, 26, 40, 123000, tzinfo=dt.UTC)
    assert record.updated_at == dt.datetime(2024, 6, 1, 8, 0, tzinfo=dt.UTC)
    assert record.updated_at.tzinfo is dt.UTC


def test_repeated_reads_of_an_entry_without_timestamps_agree() -> None:
    """An entry without createdAt reads as the epoch, so two reads give equal records."""
    entry = _stdio()
    first, second = record_from_json_dict(entry), record_from_json_dict(entry)
    assert first == second
    assert first.created_at == dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def test_config_defaults_are_left_out_of_the_json_form() -> None:
    """Only non-default config keys are written, so files stay short."""
    record = McpServerRecord(name="x", type="http", config=ServerConfig(url="https://h/mcp", ping_interval=0))
    assert record_to_json_dict(record)["config"] == {"url": "https://h/mcp", "pingInterval": 0.0}


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("entry", "server", "field", "expected"),
    [
        (_stdio(config={"command": "npx", "connectTimeout": -1}), "files", "config.connectTimeout", "> 0"),
        (_stdio(config={"command": "npx", "pingInterval": -0.5}), "files", "config.pingInterval", ">= 0"),
        (_stdio(config={"command": "npx", "callTimeout": "60"}), "files", "config.callTimeout", "a number"),
        (_stdio(type="stdoi"), "files", "type", "one of 'stdio', 'sse', 'http'"),
        (_stdio(config={}), "files", "config.command", "required for a stdio server"),
        (_stdio(type="sse"), "files", "config.url", "required for an sse server"),
        (_stdio(type="http", config={"url": "ftp://h/x"}), "files", "config.url", "http:// or https://"),
        (
            _stdio(type="http", config={"url": "https://h/x", "command": "npx"}),
            "files",
            "config.command",
            "only for stdio",
        ),
        (_stdio(config={"command": "npx", "url": "https://h"}), "files", "config.url", "only for sse/http"),
        (_stdio(config={"command": "npx", "args": "-y pkg"}), "files", "config.args", "a list of strings"),
        (_stdio(config={"command": "npx", "args": ["-y", 3]}), "files", "config.args[1]", "a string"),
        (_stdio(config={"command": "npx", "env": {"A": 1}}), "files", "config.env.A", "a string"),
        (_stdio(isActive="yes"), "files", "isActive", "true or false"),
        (_stdio(isActve=True), "files", "isActve", "did you mean 'isActive'"),
        (_stdio(config={"command": "npx", "retries": 3}), "files", "config.retries", "not a known key"),
        (_stdio(config="npx"), "files", "config", "an object"),
        (_stdio(createdAt="yesterday"), "files", "createdAt", "ISO-8601"),
        (_stdio(createdAt="2025-01-01T00:00:00"), "files", "createdAt", "'Z' or an offset"),
        (_stdio(createdAt=10**30), "files", "createdAt", "out of range"),
        (_stdio(scope="global"), "files", "scope", "'user', 'local'"),
        (_stdio(installSource="npm"), "files", "installSource", "'builtin', 'manual'"),
        (_stdio(name=""), "mcp_1_a", "name", "must not be empty"),
        ({"name": "files", "type": "stdio", "config": {"command": "npx"}}, "files", "id", "required"),
        (_stdio(id="has space"), "files", "id", "letters, digits"),
    ],
)
def test_invalid_entries_name_the_server_and_the_field(
    entry: dict[str, Any], server: str, field: str, expected: str
) -> None:
    """Each bad entry raises InvalidServerConfig naming the server, the camelCase field and the rule."""
    with pytest.raises(InvalidServerConfig) as caught:
        record_from_json_dict(entry)
    error = caught.value
    assert error.server == server
    assert error.field == field
    message = str(error)
    assert f"server {server!r}" in message
    assert field in message
    assert expected in message


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("\x1b]0;pwned\x07x", "the control character U+001B at position 0"),
        ("\x1b[2Jevil\nline", "the control character U+001B at position 0"),
        ("two\nlines", "the control character U+000A at position 3"),
        ("a\tb", "the control character U+0009 at position 1"),
        ("del\x7f", "the control character U+007F at position 3"),
        ("c1\x9b31m", "the control character U+009B at position 2"),
        ("nul\x00", "the control character U+0000 at position 3"),
        (" padded", "must not start or end with whitespace"),
        ("padded ", "must not start or end with whitespace"),
    ],
)
def test_a_name_with_control_characters_or_outer_whitespace_is_refused(name: str, said: str) -> None:
    """A server name reaches terminals: control characters (C0, DEL, C1) and outer whitespace are refused.

    Before, any non-empty name was accepted, and escape sequences in it went raw to the
    terminal in every table and message that shows the name. The error names the server
    (escaped), the field, the character and its position, and says what is allowed.
    """
    for make in (
        lambda: record_from_json_dict(_stdio(name=name)),
        lambda: McpServerRecord(name=name, type="stdio", config=ServerConfig(command="x")),
    ):
        with pytest.raises(InvalidServerConfig) as caught:
            make()
        assert caught.value.field == "name"
        assert said in str(caught.value)
        assert "letters, digits, spaces and punctuation" in str(caught.value) or "whitespace" in said
        assert not re.search(r"[\x00-\x1f\x7f-\x9f]", str(caught.value)), "the message itself is safe to print"
    with pytest.raises(InvalidServerConfig) as in_file:
        records_from_document({"mcpServers": [_stdio(name=name)]})
    assert in_file.value.field == "mcpServers[0].name"
    assert McpServerRecord(name="My Server: é/ü", type="stdio", config=ServerConfig(command="x")).name


def test_all_problems_of_an_entry_are_reported_at_once() -> None:
    """Several bad fields are all listed; `field` is the first."""
    entry = _stdio(isActive=1, config={"command": 5, "callTimeout": None})
    with pytest.raises(InvalidServerConfig) as caught:
        record_from_json_dict(entry)
    message = str(caught.value)
    assert "config.command must be a string" in message
    assert "config.callTimeout must be a number" in message
    assert "isActive must be true or false" in message


def test_a_non_object_entry_is_rejected() -> None:
    """An entry that is not an object is an InvalidServerConfig, not a crash."""
    with pytest.raises(InvalidServerConfig, match="must be a JSON object, got a list"):
        record_from_json_dict(["npx"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"connect_timeout": 0}, "connectTimeout"),
        ({"call_timeout": float("inf")}, "callTimeout"),
        ({"ping_interval": float("nan")}, "pingInterval"),
        ({"call_timeout": True}, "callTimeout"),
        ({"args": "-y"}, "args"),
        ({"env": {"A=B": "v"}}, "env.A=B"),
        ({"env": {"": "v"}}, "env"),
        ({"headers": {"Bad Header": "v"}}, "headers.Bad Header"),
        ({"headers": {"X-Token": "a\r\nInjected: 1"}}, "headers.X-Token"),
        ({"url": "https://"}, "url"),
        ({"command": "  "}, "command"),
    ],
)
def test_python_construction_validates_config_fields(kwargs: dict[str, Any], field: str) -> None:
    """Building a ServerConfig in Python raises InvalidServerConfig naming the camelCase field."""
    with pytest.raises(InvalidServerConfig) as caught:
        ServerConfig(**kwargs)
    assert caught.value.field == field


def test_python_construction_checks_the_config_against_the_type() -> None:
    """A stdio record without a command and an http record without a URL are refused."""
    with pytest.raises(InvalidServerConfig, match=r"server 'a': config\.command is required"):
        McpServerRecord(name="a", type=ServerType.STDIO, config=ServerConfig())
    with pytest.raises(InvalidServerConfig, match=r"config\.url is required for an http server"):
        McpServerRecord(name="a", type="http", config=ServerConfig())
    with pytest.raises(InvalidServerConfig) as caught:
        McpServerRecord(name="a", type="smtp", config=ServerConfig(command="x"))
    assert caught.value.field == "type"


def test_naive_timestamps_are_refused_and_aware_ones_normalised() -> None:
    """created_at must be timezone-aware; any offset is stored as UTC."""
    with pytest.raises(InvalidServerConfig) as caught:
        McpServerRecord(name="a", type="stdio", config=ServerConfig(command="x"), created_at=dt.datetime(2025, 1, 1))
    assert caught.value.field == "createdAt"
    plus_two = dt.timezone(dt.timedelta(hours=2))
    record = McpServerRecord(
        name="a", type="stdio", config=ServerConfig(command="x"), created_at=dt.datetime(2025, 1, 1, 2, tzinfo=plus_two)
    )
    assert record.created_at == dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    assert record.created_at.tzinfo is dt.UTC


# ----------------------------------------------------------------------------- documents


def test_document_version_newer_than_ours_is_refused() -> None:
    """A file from a newer mcp-actors is a clear ConfigError on `version`, not a partial read."""
    with pytest.raises(ConfigError, match="newer mcp-actors") as caught:
        records_from_document({"version": 2, "mcpServers": []})
    assert caught.value.field == "version"


@pytest.mark.parametrize("version", [0, "1", True, 1.5])
def test_document_version_must_be_a_positive_integer(version: Any) -> None:
    """A nonsensical version is rejected."""
    with pytest.raises(ConfigError) as caught:
        records_from_document({"version": version, "mcpServers": []})
    assert caught.value.field == "version"


def test_document_without_version_is_version_one() -> None:
    """The reference design's files carry no version; they read as version 1."""
    assert records_from_document({"mcpServers": [_stdio()]})[0].name == "files"
    assert records_from_document({}) == []


def test_document_errors_name_the_entry_index_and_field() -> None:
    """An entry error in a document carries mcpServers[i].<field> and the server's name."""
    document = {"mcpServers": [_stdio(), _stdio(id="mcp_2_b", name="web", type="http", config={"url": "x"})]}
    with pytest.raises(InvalidServerConfig) as caught:
        records_from_document(document)
    assert caught.value.field == "mcpServers[1].config.url"
    assert caught.value.server == "web"
    assert str(caught.value).startswith("mcpServers[1]: invalid server 'web'")


def test_document_with_duplicate_ids_is_refused() -> None:
    """Two entries with one id cannot both be addressed; the second is reported."""
    with pytest.raises(InvalidServerConfig, match=r"already used by mcpServers\[0\]") as caught:
        records_from_document({"mcpServers": [_stdio(), _stdio(name="other")]})
    assert caught.value.field == "mcpServers[1].id"


@pytest.mark.parametrize(
    ("first", "second", "said"),
    [
        ("a", "a", "name 'a' is already used by mcpServers[0]"),
        ("my-srv", "my_srv", "name 'my_srv' collides with 'my-srv' of mcpServers[0]: both become 'my_srv'"),
    ],
)
def test_document_with_duplicate_names_is_refused(first: str, second: str, said: str) -> None:
    """Two entries with one name (or names equal once cleaned for tool ids) are refused like a shared id.

    Before, only ids were checked: both records were read, and the CLI then showed one and
    connected, called, updated or removed the other.
    """
    document = {"mcpServers": [_stdio(id="i1", name=first), _stdio(id="i2", name=second)]}
    with pytest.raises(DuplicateServerName) as caught:
        records_from_document(document)
    assert isinstance(caught.value, ConfigError)
    assert caught.value.field == "mcpServers[1].name"
    assert caught.value.server == second
    message = str(caught.value)
    assert message.startswith("mcpServers[1]: ") and said in message
    assert "rename one" in message


def test_desktop_app_shape_in_a_document_points_to_import() -> None:
    """`mcpServers` as an object (the desktop format) gets a hint to import it instead."""
    with pytest.raises(ConfigError, match="desktop-app format; import it") as caught:
        records_from_document({"mcpServers": {"files": {"command": "npx"}}})
    assert caught.value.field == "mcpServers"


# ----------------------------------------------------------------------------- ids, demo, updates


def test_new_server_ids_have_the_reference_format_and_are_unique() -> None:
    """Ids are mcp_{ms timestamp}_{random} and do not repeat."""
    ids = {new_server_id() for _ in range(2000)}
    assert len(ids) == 2000
    for server_id in list(ids)[:50]:
        match = re.fullmatch(r"mcp_(\d+)_([a-z0-9]{9})", server_id)
        assert match is not None
        assert abs(int(match[1]) / 1000 - dt.datetime.now(dt.UTC).timestamp()) < 60


def test_builtin_demo_record_is_the_trusted_builtin_demo_server() -> None:
    """The demo record runs the demo server with this interpreter (symbolic command), is builtin, trusted, stable."""
    demo = builtin_demo_record()
    assert demo.id == DEMO_SERVER_ID
    assert demo.name == "demo"
    assert demo.type is ServerType.STDIO
    assert demo.config.command == "${mcpActors:python}"
    assert StdioParams.from_record(demo).resolved(label="demo").command == sys.executable
    assert demo.config.args == ("-m", "mcp_actors.demo_server")
    assert demo.install_source is InstallSource.BUILTIN
    assert demo.is_trusted and demo.is_active
    assert builtin_demo_record() == demo


def test_updated_keeps_identity_and_stamps_the_time() -> None:
    """updated() changes fields, keeps id and created_at, and moves updated_at forward."""
    old = McpServerRecord(
        name="a", type="stdio", config=ServerConfig(command="x"), created_at=dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    )
    new = old.updated(is_active=False)
    assert (new.id, new.created_at, new.is_active) == (old.id, old.created_at, False)
    assert new.updated_at > old.updated_at
    with pytest.raises(ValueError, match="id of a record is immutable"):
        old.updated(id="mcp_2_other")
    with pytest.raises(InvalidServerConfig):
        old.updated(type="http")


def test_records_are_frozen_hashable_and_picklable() -> None:
    """Records are values: immutable, usable as dict keys, and they survive pickling."""
    record = McpServerRecord(
        name="a", type="http", config=ServerConfig(url="https://h/mcp", headers={"Authorization": "t"})
    )
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        record.name = "b"  # type: ignore[misc]
    with pytest.raises(TypeError):
        record.config.headers["Authorization"] = "u"  # type: ignore[index]
    assert {record: 1}[record] == 1
    assert pickle.loads(pickle.dumps(record)) == record


def test_secret_map_is_a_read_only_mapping_equal_to_a_dict() -> None:
    """SecretMap reads like a dict, compares equal to one, and rejects non-string values."""
    secrets = SecretMap({"A": "1", "B": "2"})
    assert secrets == {"A": "1", "B": "2"} and dict(secrets) == {"A": "1", "B": "2"}
    assert secrets["A"] == "1" and len(secrets) == 2 and list(secrets) == ["A", "B"]
    assert hash(secrets) == hash(SecretMap([("B", "2"), ("A", "1")]))
    with pytest.raises(TypeError, match="value of 'A' must be a string, got a number"):
        SecretMap({"A": 1})  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- secrets

_SECRET = "SECRET-tok-4f9a"


@given(secret=st.from_regex(r"SECRET-[A-Za-z0-9]{8,20}", fullmatch=True))
def test_reprs_never_show_env_or_header_values(secret: str) -> None:
    """repr/str of records, configs and SecretMaps show keys and '***', never the values."""
    stdio = McpServerRecord(name="a", type="stdio", config=ServerConfig(command="npx", env={"TOKEN": secret}))
    remote = McpServerRecord(
        name="b",
        type="http",
        config=ServerConfig(url=f"https://user:{secret}@h/mcp?key={secret}", headers={"Authorization": secret}),
    )
    for shown in (repr(stdio), str(stdio), repr(stdio.config.env), repr(remote), repr(remote.config.headers)):
        assert secret not in shown
    assert "'TOKEN': '***'" in repr(stdio)
    assert "'Authorization': '***'" in repr(remote)
    assert "https://***@h/mcp?***" in repr(remote)


@pytest.mark.parametrize(
    "entry",
    [
        _stdio(config={"command": "npx", "env": {"A=B": _SECRET}}),
        _stdio(type="http", config={"url": "https://h/mcp", "headers": {"X-Key": f"{_SECRET}\r\nEvil: 1"}}),
        _stdio(type="http", config={"url": "https://h/mcp", "headers": {"Bad Name": _SECRET}}),
        _stdio(type="http", config={"url": f"ftp://u:{_SECRET}@h/?t={_SECRET}"}),
        _stdio(type="http", config={"url": "https://h/mcp", "env": {"K": _SECRET}}),
        _stdio(config={"command": "npx", "env": {"K": _SECRET, "N": 5}, "callTimeout": "x"}),
        _stdio(config={"command": "npx", "headers": {"Authorization": _SECRET}}),
    ],
)
def test_errors_never_show_env_or_header_values(entry: dict[str, Any]) -> None:
    """Validation errors name keys and fields, never the secret values next to them."""
    with pytest.raises(InvalidServerConfig) as caught:
        record_from_json_dict(entry)
    assert _SECRET not in str(caught.value)
    assert _SECRET not in repr(caught.value)


def test_redact_url_hides_user_info_and_query() -> None:
    """redact_url keeps scheme, host, port and path; hides credentials and query; drops the fragment."""
    assert redact_url("https://u:p@example.com:8443/a/b?token=x#frag") == "https://***@example.com:8443/a/b?***"
    assert redact_url("http://localhost:3000/mcp") == "http://localhost:3000/mcp"
    assert redact_url("http://[::1") == "<unparsable url>"


def test_public_names_are_exported_sorted() -> None:
    """The module's __all__ is sorted and every name in it exists."""
    assert records_module.__all__ == sorted(records_module.__all__)
    for name in records_module.__all__:
        assert hasattr(records_module, name)


def test_the_codec_names_are_the_records_module_names_whichever_is_imported_first() -> None:
    """The private codec module and records export the same objects, and either may be imported first."""
    import subprocess

    from mcp_actors._config import codec as _record_codec

    for name in _record_codec.__all__:
        assert getattr(records_module, name) is getattr(_record_codec, name)
        # The codec's converter is plumbing: reachable from records, not in its documented face.
        assert name in records_module.__all__ or name == "converter"
    for first in ("mcp_actors._config.codec", "mcp_actors.records"):
        code = f"import {first}; from mcp_actors.records import converter, record_from_json_dict; print('ok')"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
        assert done.stdout.strip() == "ok", done.stderr


def test_field_problems_from_validators_hooks_and_imports_share_one_shape() -> None:
    """A constructor validator, a JSON hook and an import translation all report InvalidServerConfig with the field."""
    from mcp_actors._config.host_import import parse_server_configs

    with pytest.raises(InvalidServerConfig) as built:
        ServerConfig(connect_timeout=-1.0)
    with pytest.raises(InvalidServerConfig) as decoded:
        record_from_json_dict({"id": "x", "name": "n", "type": "stdio", "config": {"command": 5}})
    imported = parse_server_configs('{"n": {"command": "npx", "timeout": "soon"}}').entries[0].error
    assert (built.value.field, decoded.value.field, imported.field if imported else None) == (
        "connectTimeout",
        "config.command",
        "timeout",
    )
    for error in (built.value, decoded.value, imported):
        assert isinstance(error, InvalidServerConfig)
