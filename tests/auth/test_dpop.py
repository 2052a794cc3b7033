"""DPoP's mechanism (RFC 9449): keys, proofs checked with the public key, nonces, challenges, the decision."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from typing import Any

import httpx2
import jwt
import pytest

from mcp_actors._auth.dpop import (
    DpopKey,
    Nonces,
    TokenBinding,
    access_token_hash,
    challenge_schemes,
    decide_dpop,
    is_nonce_challenge,
    target_uri,
)
from mcp_actors._config.record import DpopMode


def verify_proof(proof: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The proof's header and claims, its signature checked with the public key its header carries."""
    header = jwt.get_unverified_header(proof)
    key = jwt.PyJWK(header["jwk"], algorithm="ES256")
    claims = jwt.decode(proof, key.key, algorithms=["ES256"])
    return header, claims


def _sha256_b64url(text: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()


def test_a_resource_proof_carries_every_claim_and_verifies_with_its_public_key() -> None:
    """typ dpop+jwt, ES256, the public jwk only; jti, htm, htu, iat, ath and nonce, signed by the key."""
    key = DpopKey.generate()
    proof = key.proof("POST", "https://mcp.example.com/mcp", access_token="tok-1", nonce="n-1")
    header, claims = verify_proof(proof)
    assert header == {"typ": "dpop+jwt", "alg": "ES256", "jwk": key.public_jwk}
    assert "d" not in header["jwk"]
    assert claims["htm"] == "POST"
    assert claims["htu"] == "https://mcp.example.com/mcp"
    assert abs(claims["iat"] - time.time()) < 5
    assert claims["ath"] == _sha256_b64url("tok-1")
    assert claims["nonce"] == "n-1"
    assert isinstance(claims["jti"], str) and len(claims["jti"]) >= 16


def test_a_token_request_proof_has_no_ath_and_no_nonce_unless_given() -> None:
    """Without an access token there is no ath; without a nonce from the server, no nonce claim."""
    _, claims = verify_proof(DpopKey.generate().proof("POST", "https://as.example.com/token"))
    assert set(claims) == {"jti", "htm", "htu", "iat"}


def test_every_proof_has_a_fresh_jti() -> None:
    """The same request twice gets two proofs with two different ids (a server may refuse a replay)."""
    key = DpopKey.generate()
    ids = {verify_proof(key.proof("GET", "https://x/mcp", access_token="t"))[1]["jti"] for _ in range(50)}
    assert len(ids) == 50


def test_ath_is_base64url_sha256_of_the_token_and_follows_a_new_token() -> None:
    """ath is recomputed when the token changes (the hash of the last one is kept)."""
    key = DpopKey.generate()
    assert access_token_hash("abc") == _sha256_b64url("abc")
    first = verify_proof(key.proof("POST", "https://x/mcp", access_token="old"))[1]["ath"]
    second = verify_proof(key.proof("POST", "https://x/mcp", access_token="new"))[1]["ath"]
    assert (first, second) == (_sha256_b64url("old"), _sha256_b64url("new"))


def test_the_thumbprint_is_rfc_7638() -> None:
    """jkt is the SHA-256 of the canonical public JWK (what a bound token's cnf.jkt names); joserfc agrees."""
    key = DpopKey.generate()
    canonical = json.dumps({k: key.public_jwk[k] for k in ("crv", "kty", "x", "y")}, separators=(",", ":"))
    assert key.jkt == _sha256_b64url(canonical)
    joserfc_jwk = pytest.importorskip("joserfc.jwk")
    assert key.jkt == joserfc_jwk.ECKey.import_key(key.public_jwk).thumbprint()


def test_a_key_survives_its_private_jwk() -> None:
    """The token store's form gives back the same key: same thumbprint, proofs verify with the old public key."""
    key = DpopKey.generate()
    again = DpopKey.from_jwk(key.private_jwk())
    assert again.jkt == key.jkt and again.public_jwk == key.public_jwk
    header, _ = verify_proof(again.proof("POST", "https://x/mcp"))
    assert header["jwk"] == key.public_jwk


@pytest.mark.parametrize(
    "damage",
    [
        {"kty": "RSA"},
        {"crv": "P-384"},
        {"d": None},
        {"d": "!!"},
        {"x": "AAAA"},
    ],
)
def test_a_damaged_stored_key_is_refused(damage: dict[str, Any]) -> None:
    """A stored key that is not a private P-256 JWK (or whose coordinates do not match) is a ValueError."""
    jwk: dict[str, Any] = {**DpopKey.generate().private_jwk(), **damage}
    with pytest.raises(ValueError):
        DpopKey.from_jwk(jwk)


def test_the_repr_never_shows_the_private_key() -> None:
    """repr names the thumbprint, never d."""
    key = DpopKey.generate()
    assert key.private_jwk()["d"] not in repr(key)
    assert key.jkt in repr(key)


@pytest.mark.parametrize(
    ("url", "htu"),
    [
        ("https://mcp.example.com/mcp?session=1#x", "https://mcp.example.com/mcp"),
        ("https://user:pw@mcp.example.com:8443/a/b", "https://mcp.example.com:8443/a/b"),
        ("http://127.0.0.1:9000", "http://127.0.0.1:9000/"),
        ("HTTPS://MCP.Example.COM/Path", "https://mcp.example.com/Path"),
    ],
)
def test_htu_drops_query_fragment_and_user_info(url: str, htu: str) -> None:
    """htu is the URI without query and fragment (RFC 9449 §4.2), and never the URL's credentials."""
    assert target_uri(url) == htu


def test_nonces_are_per_origin_and_any_response_refreshes_them() -> None:
    """A DPoP-Nonce is kept for the origin that sent it; a later one replaces it; other origins are apart."""
    nonces = Nonces()
    htu, origin = nonces.target("https://as.example.com/token?x=1")
    assert (htu, origin) == ("https://as.example.com/token", "https://as.example.com")
    assert nonces.get(origin) is None
    assert nonces.remember(origin, httpx2.Headers({"DPoP-Nonce": "one"})) == "one"
    assert nonces.remember(origin, httpx2.Headers({})) is None
    assert nonces.get(origin) == "one"
    nonces.remember(origin, httpx2.Headers({"dpop-nonce": "two"}))
    assert nonces.get(origin) == "two"
    assert nonces.get("https://mcp.example.com") is None


@pytest.mark.parametrize(
    ("header", "schemes"),
    [
        ('DPoP resource_metadata="https://x/.well-known/oauth-protected-resource/mcp"', {"dpop"}),
        ('Bearer realm="a, b", DPoP algs="ES256 PS256"', {"bearer", "dpop"}),
        ('Bearer error="invalid_token", error_description="dpop, nope"', {"bearer"}),
        ("Basic", {"basic"}),
        ("", set()),
    ],
)
def test_challenge_schemes(header: str, schemes: set[str]) -> None:
    """The schemes of a WWW-Authenticate value, past quoted commas and auth-params."""
    assert challenge_schemes(header) == schemes


def test_nonce_challenges_of_the_authorization_server_and_the_resource_server() -> None:
    """400 use_dpop_nonce with a nonce (AS, §8) and 401 DPoP error=use_dpop_nonce with a nonce (RS, §9)."""
    nonce = {"DPoP-Nonce": "n"}
    assert is_nonce_challenge(400, httpx2.Headers(nonce), "use_dpop_nonce")
    assert not is_nonce_challenge(400, httpx2.Headers(nonce), "invalid_grant")
    assert not is_nonce_challenge(400, httpx2.Headers({}), "use_dpop_nonce")
    rs = {"WWW-Authenticate": 'DPoP error="use_dpop_nonce", resource_metadata="x"', **nonce}
    assert is_nonce_challenge(401, httpx2.Headers(rs))
    assert not is_nonce_challenge(401, httpx2.Headers({**rs, "WWW-Authenticate": 'Bearer error="use_dpop_nonce"'}))
    assert not is_nonce_challenge(401, httpx2.Headers({**rs, "WWW-Authenticate": 'DPoP error="invalid_token"'}))
    assert not is_nonce_challenge(403, httpx2.Headers(rs))


def test_token_binding_round_trips_and_says_whether_it_is_bound() -> None:
    """The store's form of a binding; a Bearer answer is obtained with the key but presented as Bearer."""
    binding = TokenBinding(jkt="abc", token_type="DPoP")
    assert TokenBinding.from_json(binding.to_json()) == binding
    assert binding.bound and not TokenBinding(jkt="abc", token_type="Bearer").bound
    assert TokenBinding.from_json({"jkt": 1}) is None and TokenBinding.from_json(None) is None


def _decide(mode: DpopMode, **kwargs: Any) -> tuple[bool, str | None]:
    decision = decide_dpop(mode, **{"as_algorithms": None, **kwargs})
    return decision.use, decision.problem


def test_auto_needs_both_the_authorization_server_and_the_resource_server() -> None:
    """auto: ES256 at the AS and a DPoP challenge or DPoP metadata at the RS; the AS alone is not enough."""
    assert _decide(DpopMode.AUTO, as_algorithms=["ES256"], rs_challenge_schemes=["dpop"]) == (True, None)
    assert _decide(DpopMode.AUTO, as_algorithms=["RS256", "ES256"], rs_algorithms=["ES256"]) == (True, None)
    assert _decide(DpopMode.AUTO, as_algorithms=["ES256"], rs_challenge_schemes=["bearer"]) == (False, None)
    assert _decide(DpopMode.AUTO, as_algorithms=None, rs_challenge_schemes=["dpop"]) == (False, None)
    assert _decide(DpopMode.AUTO, as_algorithms=["PS256"], rs_challenge_schemes=["dpop"]) == (False, None)
    assert _decide(DpopMode.AUTO, as_algorithms=["ES256"], rs_algorithms=["PS256"], rs_challenge_schemes=["dpop"]) == (
        False,
        None,
    )


def test_a_resource_server_that_requires_dpop_gets_it_or_a_reason() -> None:
    """dpop_bound_access_tokens_required turns DPoP on, unless the servers accept no ES256 proof: then a problem."""
    assert _decide(DpopMode.AUTO, rs_required=True) == (True, None)
    use, problem = _decide(DpopMode.AUTO, as_algorithms=["RS256"], rs_required=True)
    assert not use and problem is not None
    assert "RS256" in problem and "ES256" in problem


def test_on_and_off() -> None:
    """on: always (unless ES256 is refused); off: never, whatever the servers say."""
    assert _decide(DpopMode.ON) == (True, None)
    assert _decide(DpopMode.ON, as_algorithms=[])[1] == (
        "the authorization server accepts DPoP proofs signed with no algorithm only; mcp-actors signs them with ES256"
    )
    assert _decide(DpopMode.OFF, as_algorithms=["ES256"], rs_required=True) == (False, None)
