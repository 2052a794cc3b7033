"""A small enterprise identity provider for tests (loopback only): ID tokens in, ID-JAGs out.

Enterprise-managed authorization (SEP-990) has three parties; this is the first. The client
holds the user's ID token from single sign-on and exchanges it here (RFC 8693 token
exchange, ``POST /token``) for an Identity Assertion JWT Authorization Grant (ID-JAG), which
the MCP server's authorization server (:mod:`mcp_actors.testing._oauth_server` with the IdP
in its ``assertionIssuers``) takes as a JWT-bearer grant.

The app is an ASGI callable with no event-loop state, so a test may build it, serve it in a
thread, and still call :meth:`IdentityProviderTestServer.id_token` and read
:attr:`~IdentityProviderTestServer.requests` from its own loop. What it checks is what an
IdP must check (draft-ietf-oauth-identity-assertion-authz-grant, section 4.3): the grant
and token types, the client's authentication (``client_secret_post`` or
``client_secret_basic``), the ID token's signature, issuer, audience (the requesting client)
and expiry, and an ``audience`` and ``resource`` to put in the ID-JAG. Options:

* ``clients``: ``{idp_client_id: {"secret": s | None, "asClientId": id}}``: the clients that
  may exchange, and the client id at the authorization server that the ID-JAG names;
* ``deny``: refuse every exchange with ``access_denied`` (the IdP's policy says no);
* ``issuedTokenType``: override the ``issued_token_type`` answered (a broken IdP);
* ``jagTtl``: the ID-JAG's lifetime in seconds (300);
* ``padding``: bytes of filler added to a successful answer (an answer too big to read).
"""

from __future__ import annotations

import base64
import secrets
import time
import urllib.parse
import uuid
from typing import Any, Final

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import Receive, Scope, Send

__all__ = ["ID_JAG_TOKEN_TYPE", "ID_TOKEN_TYPE", "TOKEN_EXCHANGE_GRANT", "IdentityProviderTestServer"]

TOKEN_EXCHANGE_GRANT: Final = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:id-jag"


class IdentityProviderTestServer:
    """The IdP's key, clients and token endpoint; every request it saw, in :attr:`requests`.

    Args:
        options: See the module docstring.
    """

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self.options: dict[str, Any] = {
            "clients": {},
            "deny": False,
            "issuedTokenType": None,
            "jagTtl": 300,
            "padding": 0,
        }
        self.options.update(options or {})
        self._key = ec.generate_private_key(ec.SECP256R1())
        self.base = ""  # http://127.0.0.1:PORT, set by the first request (or by the test)
        self.requests: list[dict[str, Any]] = []
        """Each token request: ``{"form": {...}, "basic": (id, secret) | None}``."""

    @property
    def issuer(self) -> str:
        """The IdP's issuer identifier (its base URL)."""
        return self.base

    @property
    def public_key_pem(self) -> str:
        """The PEM public key an authorization server verifies the IdP's ID-JAGs with."""
        return (
            self._key.public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
            .decode()
        )

    def id_token(self, *, subject: str = "alice@example.com", client_id: str, ttl: float = 3600) -> str:
        """An ID token for ``subject``, issued to ``client_id`` (what single sign-on left with the client)."""
        now = int(time.time())
        claims = {"iss": self.issuer, "sub": subject, "aud": client_id, "iat": now, "exp": now + int(ttl)}
        return jwt.encode(claims, self._key, algorithm="ES256")

    # ------------------------------------------------------------------ ASGI

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        if not self.base:
            host = dict(scope["headers"]).get(b"host", b"").decode()
            self.base = f"http://{host}"
        request = Request(scope, receive)
        response: Response
        if request.url.path == "/token" and request.method == "POST":
            response = await self._token(request)
        else:
            response = PlainTextResponse("not found", status_code=404)
        await response(scope, receive, send)

    # ------------------------------------------------------------------ the token exchange

    async def _token(self, request: Request) -> Response:
        form = {key: str(value) for key, value in (await request.form()).items()}
        basic = _basic_credentials(request.headers.get("authorization", ""))
        self.requests.append({"form": form, "basic": basic})
        if form.get("grant_type") != TOKEN_EXCHANGE_GRANT:
            return _error("unsupported_grant_type", "only the token exchange grant is served here")
        client_id, secret = basic if basic is not None else (form.get("client_id", ""), form.get("client_secret"))
        client = self.options["clients"].get(client_id)
        if client is None or (client.get("secret") and not secrets.compare_digest(client["secret"], secret or "")):
            return _error("invalid_client", "unknown client or wrong secret", status=401)
        if form.get("subject_token_type") != ID_TOKEN_TYPE or form.get("requested_token_type") != ID_JAG_TOKEN_TYPE:
            return _error("invalid_request", "subject_token_type must be id_token, requested_token_type id-jag")
        if not form.get("audience") or not form.get("resource"):
            return _error("invalid_request", "audience and resource are required")
        try:
            claims = jwt.decode(
                form.get("subject_token", ""),
                self._key.public_key(),
                algorithms=["ES256"],
                audience=client_id,
                issuer=self.issuer,
            )
        except jwt.ExpiredSignatureError:
            return _error("invalid_grant", "the ID token has expired")
        except jwt.PyJWTError as exc:
            return _error("invalid_grant", f"the ID token is not valid: {type(exc).__name__}")
        if self.options["deny"]:
            return _error("access_denied", "policy does not allow this client to reach that resource")
        now = int(time.time())
        jag_claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": claims["sub"],
            "aud": form["audience"],
            "resource": form["resource"],
            "client_id": client.get("asClientId", client_id),
            "jti": str(uuid.uuid4()),
            "iat": now,
            "exp": now + int(self.options["jagTtl"]),
        }
        if form.get("scope"):
            jag_claims["scope"] = form["scope"]
        jag = jwt.encode(jag_claims, self._key, algorithm="ES256", headers={"typ": "oauth-id-jag+jwt"})
        body: dict[str, Any] = {
            "access_token": jag,
            "issued_token_type": self.options["issuedTokenType"] or ID_JAG_TOKEN_TYPE,
            "token_type": "N_A",
            "expires_in": int(self.options["jagTtl"]),
        }
        if form.get("scope"):
            body["scope"] = form["scope"]
        if self.options["padding"]:
            body["padding"] = "x" * int(self.options["padding"])
        return JSONResponse(body, headers={"Cache-Control": "no-store"})


def _basic_credentials(header: str) -> tuple[str, str] | None:
    if not header.lower().startswith("basic "):
        return None
    raw = base64.b64decode(header[6:]).decode()
    client_id, _, secret = raw.partition(":")
    return urllib.parse.unquote(client_id), urllib.parse.unquote(secret)


def _error(error: str, description: str, *, status: int = 400) -> Response:
    return JSONResponse({"error": error, "error_description": description}, status_code=status)
