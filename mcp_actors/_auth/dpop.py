"""DPoP (RFC 9449; the MCP profile of SEP-1932): a key per server, a proof per request, server nonces.

A DPoP-bound access token is useless without the private key it was bound to: a token that
leaks (a log, a proxy, a compromised server replaying it elsewhere) cannot be used by anyone
who does not also hold the key. The client proves possession on every request with a
*proof*, a JWT signed by the key, naming the request (method and URI), the time, a unique
id, the access token's hash and, when the server asks for one, the server's nonce.

This module is the mechanism and nothing else: keys (:class:`DpopKey`), proofs, the rules
that read a server's answers (nonces, ``use_dpop_nonce`` challenges, the schemes a challenge
offers) and the rule that decides when to use DPoP (:func:`decide_dpop`). Which request gets
which proof is :mod:`mcp_actors._auth.oauth`'s business; where the key lives is the token
store's (:mod:`mcp_actors._auth.token_store`).

Cost: one ECDSA P-256 signature per proof (~50-100 µs of CPU; ``benchmarks.dpop`` measures
it); the header, the public key and the access token's hash are worked out once. Nothing is
signed for a server that does not use DPoP.

The SEP's proofs are RFC 9449's exactly: no ``content_digest`` claim (an earlier draft of
the MCP extension had one; the SEP dropped it for interoperability).
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import time
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Protocol

import attrs
import orjson
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from mcp_actors._config.record import DpopMode

__all__ = [
    "ALGORITHM",
    "DpopDecision",
    "DpopKey",
    "DpopMode",
    "HeaderLookup",
    "Nonces",
    "TokenBinding",
    "challenge_schemes",
    "decide_dpop",
    "is_nonce_challenge",
    "target_uri",
]

ALGORITHM: Final = "ES256"
"""The one proof algorithm we sign with: ECDSA on P-256 (the MCP extension's recommendation)."""

NONCE_HEADER: Final = "dpop-nonce"
USE_DPOP_NONCE: Final = "use_dpop_nonce"

_SIGNATURE: Final = ec.ECDSA(hashes.SHA256())
_COORDINATE_BYTES: Final = 32
_MAX_URIS: Final = 32
"""URIs whose ``htu`` and origin are remembered (a connection uses one or two: its endpoint)."""
_MAX_ORIGINS: Final = 16


class HeaderLookup(Protocol):
    """A response's headers as both HTTP clients give them: a case-insensitive ``get``."""

    def get(self, key: str, /) -> str | None:
        """The first value of the header ``key``, or None (or empty)."""
        ...


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64_bytes(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def access_token_hash(access_token: str) -> str:
    """``ath``: base64url of the SHA-256 of the access token's ASCII bytes (RFC 9449 §4.2)."""
    return _b64(hashlib.sha256(access_token.encode("ascii")).digest())


class DpopKey:
    """One server's DPoP key pair (EC P-256) and the proofs it signs.

    The private part leaves this object only as :meth:`private_jwk`, for the token store;
    the repr shows the public thumbprint only.
    """

    __slots__ = ("_ath", "_header", "_key", "jkt", "public_jwk")

    def __init__(self, key: ec.EllipticCurvePrivateKey) -> None:
        if not isinstance(key.curve, ec.SECP256R1):
            raise ValueError(f"a DPoP key must be on P-256, got {key.curve.name}")
        self._key = key
        numbers = key.public_key().public_numbers()
        self.public_jwk: dict[str, str] = {
            "kty": "EC",
            "crv": "P-256",
            "x": _b64(numbers.x.to_bytes(_COORDINATE_BYTES, "big")),
            "y": _b64(numbers.y.to_bytes(_COORDINATE_BYTES, "big")),
        }
        # RFC 7638: the required members, in lexicographic order, no whitespace.
        canonical = orjson.dumps({name: self.public_jwk[name] for name in ("crv", "kty", "x", "y")})
        self.jkt: str = _b64(hashlib.sha256(canonical).digest())
        """The key's JWK SHA-256 thumbprint: what a bound token's ``cnf.jkt`` names."""
        header = {"typ": "dpop+jwt", "alg": ALGORITHM, "jwk": self.public_jwk}
        self._header = _b64_bytes(orjson.dumps(header))
        self._ath: tuple[str, str] = ("", "")  # (the last access token, its hash): one hash per token

    def __repr__(self) -> str:
        return f"DpopKey(jkt={self.jkt!r})"

    @classmethod
    def generate(cls) -> DpopKey:
        """A new random key."""
        return cls(ec.generate_private_key(ec.SECP256R1()))

    @classmethod
    def from_jwk(cls, jwk: Mapping[str, Any]) -> DpopKey:
        """The key a :meth:`private_jwk` holds.

        Raises:
            ValueError: Not a private EC P-256 JWK (a stored key that was damaged).
        """
        if jwk.get("kty") != "EC" or jwk.get("crv") != "P-256" or not isinstance(jwk.get("d"), str):
            raise ValueError("not a private EC P-256 JWK")
        try:
            secret = int.from_bytes(_unb64(jwk["d"]), "big")
            key = cls(ec.derive_private_key(secret, ec.SECP256R1()))
        except (ValueError, TypeError, OverflowError):
            raise ValueError("not a valid P-256 private key") from None
        if key.public_jwk["x"] != jwk.get("x") or key.public_jwk["y"] != jwk.get("y"):
            raise ValueError("the JWK's public coordinates do not match its private key")
        return key

    def private_jwk(self) -> dict[str, str]:
        """The key as a private JWK (``d`` included): for the token store only."""
        secret = self._key.private_numbers().private_value.to_bytes(_COORDINATE_BYTES, "big")
        return {**self.public_jwk, "d": _b64(secret)}

    def proof(self, method: str, htu: str, *, access_token: str | None = None, nonce: str | None = None) -> str:
        """A fresh proof JWT for one request (RFC 9449 §4.2).

        Args:
            method: The request's HTTP method (``htm``).
            htu: The request's URI without query and fragment (:func:`target_uri`).
            access_token: The token the request presents; its hash goes in ``ath``. None for
                a token request.
            nonce: The server's latest nonce for this origin, if it gave one.

        Returns:
            The compact JWS, for the ``DPoP`` header. Never log it: it is a credential for
            the request it names, for as long as the server accepts its ``iat``.
        """
        claims: dict[str, Any] = {"jti": secrets.token_urlsafe(16), "htm": method, "htu": htu, "iat": int(time.time())}
        if access_token is not None:
            held, ath = self._ath
            if held != access_token:
                ath = access_token_hash(access_token)
                self._ath = (access_token, ath)
            claims["ath"] = ath
        if nonce is not None:
            claims["nonce"] = nonce
        signing_input = self._header + b"." + _b64_bytes(orjson.dumps(claims))
        r, s = decode_dss_signature(self._key.sign(signing_input, _SIGNATURE))
        signature = r.to_bytes(_COORDINATE_BYTES, "big") + s.to_bytes(_COORDINATE_BYTES, "big")
        return (signing_input + b"." + _b64_bytes(signature)).decode("ascii")


@attrs.frozen(kw_only=True)
class TokenBinding:
    """Which DPoP key a server's stored tokens were obtained with, and how the access token is presented.

    Attributes:
        jkt: The thumbprint of the key whose proofs obtained the tokens. Refreshes are proved
            with that key; tokens bound to any other key are never used.
        token_type: The access token's ``token_type`` as the authorization server answered:
            ``"DPoP"`` (presented as ``Authorization: DPoP``, with a proof on every request) or
            ``"Bearer"`` (the server chose not to bind it: presented as a bearer token).
    """

    jkt: str
    token_type: str = "DPoP"

    @property
    def bound(self) -> bool:
        """Whether the access token is DPoP-bound (a proof on every resource request)."""
        return self.token_type.lower() == "dpop"

    def to_json(self) -> dict[str, str]:
        """The token store's form."""
        return {"jkt": self.jkt, "tokenType": self.token_type}

    @classmethod
    def from_json(cls, raw: object) -> TokenBinding | None:
        """The binding a token store entry holds, or None (none, or damaged)."""
        if not isinstance(raw, Mapping):
            return None
        jkt, token_type = raw.get("jkt"), raw.get("tokenType")
        if not isinstance(jkt, str) or not isinstance(token_type, str):
            return None
        return cls(jkt=jkt, token_type=token_type)


class Nonces:
    """The latest ``DPoP-Nonce`` each origin gave (RFC 9449 §8, §9), and the ``htu`` of each URI.

    Nonces are short-lived and per server, so they are kept in memory only, per connection;
    any response's ``DPoP-Nonce`` header replaces the origin's nonce.
    """

    __slots__ = ("_nonces", "_uris")

    def __init__(self) -> None:
        self._nonces: dict[str, str] = {}
        self._uris: dict[str, tuple[str, str]] = {}

    def __repr__(self) -> str:
        return f"Nonces(origins={sorted(self._nonces)!r})"

    def target(self, url: str) -> tuple[str, str]:
        """``(htu, origin)`` of ``url``; remembered, as a connection asks for the same few URIs."""
        known = self._uris.get(url)
        if known is None:
            if len(self._uris) >= _MAX_URIS:
                self._uris.clear()
            known = self._uris[url] = _split_target(url)
        return known

    def get(self, origin: str) -> str | None:
        """The origin's latest nonce, or None."""
        return self._nonces.get(origin)

    def remember(self, origin: str, headers: HeaderLookup) -> str | None:
        """Keep the ``DPoP-Nonce`` of a response from ``origin``, if it has one; return it."""
        nonce = headers.get(NONCE_HEADER)
        if nonce:
            if origin not in self._nonces and len(self._nonces) >= _MAX_ORIGINS:
                self._nonces.clear()
            self._nonces[origin] = nonce
            return nonce
        return None


def _split_target(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]  # never the user info
    origin = f"{parts.scheme.lower()}://{netloc.lower()}"
    return origin + (parts.path or "/"), origin


def target_uri(url: str) -> str:
    """``htu``: the URI without user info, query and fragment (RFC 9449 §4.2)."""
    return _split_target(url)[0]


_QUOTED: Final = re.compile(r'"(?:[^"\\]|\\.)*"')
_NONCE_ERROR: Final = re.compile(r'\berror\s*=\s*"?use_dpop_nonce\b')


def challenge_schemes(header: str) -> frozenset[str]:
    """The authentication schemes a ``WWW-Authenticate`` value offers, lower case.

    A value may hold several challenges (``Bearer realm="x", DPoP algs="ES256"``): a scheme
    is a token at the start of a comma-separated part that is not an ``auth-param`` name.
    """
    schemes = set()
    for part in _QUOTED.sub('""', header).split(","):
        word = part.strip().split(" ", 1)[0]
        if word and "=" not in word:
            schemes.add(word.lower())
    return frozenset(schemes)


def is_nonce_challenge(status: int, headers: HeaderLookup, error: str | None = None) -> bool:
    """Whether a response asks for the request again with the server's nonce.

    The authorization server answers 400 with the error ``use_dpop_nonce`` in its JSON body
    (``error``, read by the caller) and the nonce in ``DPoP-Nonce`` (RFC 9449 §8); a resource
    server answers 401 with ``WWW-Authenticate: DPoP error="use_dpop_nonce"`` (§9).
    """
    if not headers.get(NONCE_HEADER):
        return False
    if status == 400:
        return error == USE_DPOP_NONCE
    if status == 401:
        challenge = headers.get("www-authenticate") or ""
        return _NONCE_ERROR.search(challenge) is not None and "dpop" in challenge_schemes(challenge)
    return False


@attrs.frozen
class DpopDecision:
    """What :func:`decide_dpop` found: whether to use DPoP, or why it cannot be done."""

    use: bool
    problem: str | None = None


def _lists_ours(algorithms: Sequence[str] | None) -> bool | None:
    return None if algorithms is None else ALGORITHM in algorithms


def decide_dpop(
    mode: DpopMode,
    *,
    as_algorithms: Sequence[str] | None,
    rs_algorithms: Sequence[str] | None = None,
    rs_required: bool = False,
    rs_challenge_schemes: Iterable[str] = (),
) -> DpopDecision:
    """Whether a server's token requests carry proofs (its tokens then come DPoP-bound).

    ``auto`` uses DPoP when both sides accept it: the authorization server lists ES256 in
    ``dpop_signing_alg_values_supported`` (RFC 9449 §5.1) *and* the resource server says it
    takes DPoP tokens (its 401 challenge offers the ``DPoP`` scheme, §7.1, or its metadata
    lists ``dpop_signing_alg_values_supported``, RFC 9728), or whenever the resource server
    requires it (``dpop_bound_access_tokens_required``). The authorization server's word
    alone is not enough: an identity provider that supports DPoP for all its clients would
    bind tokens that a resource server knowing only ``Bearer`` then refuses.

    Args:
        mode: ``config.oauth.dpop``.
        as_algorithms: The authorization server's ``dpop_signing_alg_values_supported``
            (None: not listed).
        rs_algorithms: The protected resource metadata's ``dpop_signing_alg_values_supported``.
        rs_required: Its ``dpop_bound_access_tokens_required``.
        rs_challenge_schemes: The schemes the resource server's 401 challenge offered.

    Returns:
        The decision; ``problem`` says why DPoP is needed but cannot be done (the servers
        accept no ES256 proof), for the caller's typed error.
    """
    if mode is DpopMode.OFF:
        return DpopDecision(use=False)
    as_ok, rs_ok = _lists_ours(as_algorithms), _lists_ours(rs_algorithms)
    refusing = [
        f"{who} accepts DPoP proofs signed with {', '.join(algs) or 'no algorithm'} only"
        for who, ok, algs in (
            ("the authorization server", as_ok, as_algorithms),
            ("the resource server", rs_ok, rs_algorithms),
        )
        if ok is False and algs is not None
    ]
    needed = mode is DpopMode.ON or rs_required
    if needed:
        if refusing:
            return DpopDecision(use=False, problem=f"{'; '.join(refusing)}; mcp-actors signs them with {ALGORITHM}")
        return DpopDecision(use=True)
    rs_accepts = rs_ok is True or (rs_ok is None and "dpop" in {s.lower() for s in rs_challenge_schemes})
    return DpopDecision(use=bool(as_ok) and rs_accepts)
