"""A small OAuth authorization server guarding the demo MCP server, for tests (loopback only).

``python -m mcp_actors.testing._oauth_server [--options JSON] [--port N]`` serves, on one
port, the demo server's streamable HTTP endpoint at ``/mcp`` and its SSE endpoint at ``/sse``
behind bearer tokens, and an
authorization server beside it: protected-resource metadata (RFC 9728), authorization-server
metadata (RFC 8414 or OpenID discovery), ``/authorize`` (code + PKCE S256, auto-approved: it
redirects at once), ``/token`` (authorization_code, refresh_token, client_credentials with
client_secret_basic, client_secret_post, none or private_key_jwt; the RFC 7523 jwt-bearer grant),
``/register`` (RFC 7591).
It announces ``mcp-actors: listening on <url>/mcp`` like the demo server, so
:func:`mcp_actors.testing.serve_http` runs it.

Behaviour is set by options (``--options`` JSON at start, ``POST /_control`` later), each
one a fault or a variant a client must handle:

* ``prm``: where protected-resource metadata is found: ``"header"`` (the 401's
  ``resource_metadata``), ``"path"`` (``/.well-known/oauth-protected-resource/mcp``),
  ``"root"`` (``/.well-known/oauth-protected-resource``), ``"none"`` (2025-03-26: the
  authorization server's metadata at the server's origin).
* ``asm``: ``"oauth"`` (``oauth-authorization-server``) or ``"oidc"`` (``openid-configuration``);
  ``issuerPath``: the issuer's path (``""`` or e.g. ``"/as"``).
* ``dcr``, ``cimd``: dynamic registration / client-id metadata documents supported.
* ``clients``: pre-registered clients ``{id: {"secret": s, "publicKey": pem}}``;
  ``authMethods``: the token endpoint's supported methods.
* ``scopesSupported``, ``challengeScope``, ``stepUp`` (``{"tool": t, "scope": s}``: calling
  ``t`` needs ``s``, else 403 ``insufficient_scope``).
* ``accessTtl`` (seconds), ``refresh`` (issue refresh tokens), ``prmResource`` (a resource
  that names another server), ``malformed`` (``"prm"``/``"asm"``), ``deny`` (the user says no).
* ``assertionIssuers``: ``{iss: public key PEM}``, whose JWTs the jwt-bearer grant takes: a
  workload's token, or an ID-JAG (``typ`` ``oauth-id-jag+jwt``: its ``resource`` must be this
  server and its ``client_id`` the authenticated client) from :mod:`._idp_server`. The
  assertion's ``aud`` must be the issuer or the token endpoint.

* ``dpop``: DPoP (RFC 9449) at both servers, an object (absent or null: none). ``algs``: the
  authorization server's ``dpop_signing_alg_values_supported`` (null: not listed);
  ``challenge``: the 401's scheme, ``"Bearer"``, ``"DPoP"`` or ``"both"``; ``prmAlgs``,
  ``prmRequired``: the protected resource metadata's DPoP fields; ``bind``: answer a token
  request that carries a proof with a DPoP-bound token (default true; false: a Bearer token);
  ``asNonce``, ``rsNonce``: the nonce each server demands (``use_dpop_nonce`` until a proof
  carries it; null: none); ``rotateAsNonce``: a new one at every token request (never
  satisfied); ``refuseProofs``: the token endpoint refuses every proof. Every proof is
  checked as RFC 9449 §4.3 says (signature with its ``jwk``, ``typ``, ``htm``, ``htu``,
  ``iat``, a fresh ``jti``; ``ath`` and the token's key at the resource); a bound token needs
  its own key's proof for every request and refresh.

* ``jwt``: issue access tokens as JWTs (RFC 9068) for a resource server elsewhere, an object
  (absent or null: opaque tokens): ``keys`` (``[{"kid": k, "pem": private key PEM}]``, the
  first signs; all are published at ``/jwks``, named by the metadata's ``jwks_uri``),
  ``resources`` (more resource indicators the token endpoint accepts; a token's ``aud`` is the
  one requested, else this server's ``/mcp``).

``POST /_control`` also takes ``{"revoke": true}`` (every token dead) and
``{"expireAccess": true}`` (access tokens dead, refresh tokens live); ``GET /_stats`` returns
counters (token requests by grant, registrations, 401s, DPoP proofs accepted and refused by
method, nonce challenges), the ``resource`` values seen, ``tokenRequests`` (each jwt-bearer
token request as it came: form and Basic credentials) and every DPoP proof received.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import secrets
import time
import urllib.parse
from collections import Counter
from collections.abc import Sequence
from typing import Any

import anyio
import jwt
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import Receive, Scope, Send

__all__ = ["OAuthTestServer", "main"]

_DEFAULTS: dict[str, Any] = {
    "prm": "header",
    "asm": "oauth",
    "issuerPath": "",
    "dcr": True,
    "cimd": False,
    "clients": {},
    "authMethods": ["client_secret_basic", "client_secret_post", "none", "private_key_jwt"],
    "scopesSupported": ["mcp"],
    "challengeScope": None,
    "stepUp": None,
    "accessTtl": 3600,
    "refresh": True,
    "prmResource": None,
    "malformed": None,
    "deny": False,
    "grantableScopes": None,
    "authServers": None,
    "assertionIssuers": {},
    "dpop": None,
    "jwt": None,
}

JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"

_DPOP_WINDOW = 300
"""Seconds a proof's ``iat`` may be from now (the MCP extension's +/- 5 minutes)."""


class OAuthTestServer:
    """The state and routes of the test authorization server plus its protected resource."""

    def __init__(self, options: dict[str, Any], mcp_app: Any, sse_app: Any = None) -> None:
        self.options = {**_DEFAULTS, **options}
        self.mcp_app = mcp_app
        self.sse_app = sse_app
        self.base = ""  # http://127.0.0.1:PORT, set on the first request
        self.codes: dict[str, dict[str, Any]] = {}
        self.access: dict[str, dict[str, Any]] = {}
        self.refresh: dict[str, dict[str, Any]] = {}
        self.registered: dict[str, dict[str, Any]] = {}
        self.stats: Counter[str] = Counter()
        self.resources: list[str] = []
        self.scopes_requested: list[str] = []
        self.token_requests: list[dict[str, Any]] = []
        self.proofs: list[str] = []
        self.jtis: set[str] = set()

    # ------------------------------------------------------------------ addresses

    @property
    def issuer(self) -> str:
        return self.base + str(self.options["issuerPath"])

    @property
    def resource(self) -> str:
        return self.base + "/mcp"

    def _prm_url(self, endpoint: str = "/mcp") -> str:
        return self.base + "/.well-known/oauth-protected-resource" + endpoint

    # ------------------------------------------------------------------ ASGI

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.mcp_app(scope, receive, send)
            return
        if scope["type"] != "http":
            return
        if not self.base:
            host = dict(scope["headers"]).get(b"host", b"").decode()
            self.base = f"http://{host}"
        path: str = scope["path"]
        if path == "/mcp" or path.startswith("/mcp/"):
            await self._protected(scope, receive, send, self.mcp_app, "/mcp")
            return
        if self.sse_app is not None and (path == "/sse" or path.startswith("/messages")):
            await self._protected(scope, receive, send, self.sse_app, "/sse")
            return
        request = Request(scope, receive)
        response = await self._route(request)
        await response(scope, receive, send)

    async def _protected(self, scope: Scope, receive: Receive, send: Send, app: Any, endpoint: str) -> None:
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        auth = headers.get("authorization", "")
        scheme, _, token_text = auth.partition(" ")
        token = token_text.strip() if scheme.lower() in ("bearer", "dpop") else None
        grant = self.access.get(token) if token else None
        if grant is not None and grant["exp"] < time.time():
            grant = None
        if grant is not None and (grant.get("jkt") or scheme.lower() == "dpop"):
            url = self.base + scope["path"]
            refused = self._resource_proof(scheme, headers.get("dpop"), scope["method"], url, token or "", grant)
            if refused is not None:
                error, nonce = refused
                self.stats["mcp401"] += 1
                challenge = f'DPoP error="{error}", algs="ES256"'
                if self.options["prm"] == "header":
                    challenge += f', resource_metadata="{self._prm_url(endpoint)}"'
                extra = {"DPoP-Nonce": nonce} if nonce else {}
                response: Response = PlainTextResponse(
                    "unauthorized", status_code=401, headers={"WWW-Authenticate": challenge, **extra}
                )
                await response(scope, receive, send)
                return
        if grant is None:
            self.stats["mcp401"] += 1
            parts = []
            if self.options["prm"] == "header":
                parts.append(f'resource_metadata="{self._prm_url(endpoint)}"')
            if self.options["challengeScope"]:
                parts.append(f'scope="{self.options["challengeScope"]}"')
            if token:
                parts.append('error="invalid_token"')
            params = " " + ", ".join(parts) if parts else ""
            scheme = self._scheme()
            challenge = f'Bearer{params}, DPoP algs="ES256"' if scheme == "both" else scheme + params
            response = PlainTextResponse("unauthorized", status_code=401, headers={"WWW-Authenticate": challenge})
            await response(scope, receive, send)
            return
        step_up = self.options["stepUp"]
        if step_up and scope["method"] == "POST":
            try:
                rpc = json.loads(body)
            except ValueError:
                rpc = None
            if (
                isinstance(rpc, dict)
                and rpc.get("method") == "tools/call"
                and rpc.get("params", {}).get("name") == step_up["tool"]
                and step_up["scope"] not in grant["scope"].split()
            ):
                self.stats["mcp403"] += 1
                needed = " ".join(sorted({*grant["scope"].split(), step_up["scope"]}))
                challenge = f'Bearer error="insufficient_scope", scope="{needed}"'
                if self.options["prm"] == "header":
                    challenge += f', resource_metadata="{self._prm_url(endpoint)}"'
                response = PlainTextResponse("forbidden", status_code=403, headers={"WWW-Authenticate": challenge})
                await response(scope, receive, send)
                return
        self.stats["mcpOk"] += 1
        sent = False

        async def replay() -> Any:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await app(scope, replay, send)

    async def _route(self, request: Request) -> Response:
        path = request.url.path
        issuer_path = self.options["issuerPath"]
        prm, asm = self.options["prm"], self.options["asm"]
        if path == "/_control" and request.method == "POST":
            return await self._control(request)
        if path == "/_stats":
            return JSONResponse(
                {
                    "counts": dict(self.stats),
                    "resources": self.resources,
                    "scopes": self.scopes_requested,
                    "registered": sorted(self.registered),
                    "tokenRequests": self.token_requests,
                    "proofs": self.proofs,
                }
            )
        for endpoint in ("/mcp", "/sse"):
            if (path == "/.well-known/oauth-protected-resource" + endpoint and prm in ("header", "path")) or (
                path == "/.well-known/oauth-protected-resource" and prm == "root" and endpoint == "/mcp"
            ):
                self.stats["prm"] += 1
                return self._metadata("prm", self._prm(endpoint))
        well_known = (
            "/.well-known/oauth-authorization-server" if asm == "oauth" else "/.well-known/openid-configuration"
        )
        if prm == "none":
            asm_paths = {well_known}
        elif asm == "oauth":
            asm_paths = {well_known + issuer_path}
        else:
            asm_paths = {well_known + issuer_path, issuer_path + well_known}
        if path in asm_paths:
            self.stats["asm"] += 1
            return self._metadata("asm", self._asm())
        prefix = "" if prm == "none" else issuer_path
        if path == "/jwks" and self.options["jwt"]:
            self.stats["jwks"] += 1
            return JSONResponse({"keys": [_public_jwk(key) for key in self.options["jwt"]["keys"]]})
        if path == prefix + "/authorize":
            return self._authorize(request)
        if path == prefix + "/token" and request.method == "POST":
            return await self._token(request)
        if path == prefix + "/register" and request.method == "POST" and self.options["dcr"]:
            return await self._register(request)
        return PlainTextResponse("not found", status_code=404)

    def _metadata(self, kind: str, document: dict[str, Any]) -> Response:
        if self.options["malformed"] == kind:
            return Response('{"issuer": 42, "authorization_servers": "nope"', media_type="application/json")
        return JSONResponse(document)

    def _prm(self, endpoint: str = "/mcp") -> dict[str, Any]:
        document: dict[str, Any] = {
            "resource": self.options["prmResource"] or self.base + endpoint,
            "authorization_servers": self.options["authServers"] or [self.issuer],
            "bearer_methods_supported": ["header"],
        }
        if self.options["scopesSupported"] is not None:
            document["scopes_supported"] = self.options["scopesSupported"]
        dpop = self.options["dpop"] or {}
        if dpop.get("prmAlgs") is not None:
            document["dpop_signing_alg_values_supported"] = dpop["prmAlgs"]
        if dpop.get("prmRequired"):
            document["dpop_bound_access_tokens_required"] = True
        return document

    def _asm(self) -> dict[str, Any]:
        root = self.base if self.options["prm"] == "none" else self.issuer
        document: dict[str, Any] = {
            "issuer": root,
            "authorization_endpoint": root + "/authorize",
            "token_endpoint": root + "/token",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials", JWT_BEARER_GRANT],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": self.options["authMethods"],
            "token_endpoint_auth_signing_alg_values_supported": ["RS256", "ES256"],
            "authorization_response_iss_parameter_supported": True,
        }
        if self.options["dcr"]:
            document["registration_endpoint"] = root + "/register"
        if self.options["jwt"]:
            document["jwks_uri"] = self.base + "/jwks"
        if self.options["cimd"]:
            document["client_id_metadata_document_supported"] = True
        if self.options["scopesSupported"] is not None and self.options["prm"] == "none":
            document["scopes_supported"] = self.options["scopesSupported"]
        dpop = self.options["dpop"] or {}
        if dpop.get("algs") is not None:
            document["dpop_signing_alg_values_supported"] = dpop["algs"]
        return document

    async def _control(self, request: Request) -> Response:
        body = await request.json()
        if body.pop("revoke", False):
            self.access.clear()
            self.refresh.clear()
        if body.pop("expireAccess", False):
            self.access.clear()
        self.options.update(body)
        return JSONResponse({"ok": True})

    # ------------------------------------------------------------------ endpoints

    def _client(self, client_id: str) -> dict[str, Any] | None:
        if client_id in self.options["clients"]:
            return dict(self.options["clients"][client_id])
        if client_id in self.registered:
            return self.registered[client_id]
        if self.options["cimd"] and client_id.startswith("https://"):
            return {"secret": None}
        return None

    def _authorize(self, request: Request) -> Response:
        params = request.query_params
        redirect_uri = params.get("redirect_uri", "")
        client = self._client(params.get("client_id", ""))
        parsed = urllib.parse.urlsplit(redirect_uri)
        if client is None or parsed.hostname not in ("127.0.0.1", "localhost", "::1"):
            return PlainTextResponse("unknown client or redirect uri", status_code=400)
        if params.get("code_challenge_method") != "S256" or not params.get("code_challenge"):
            return PlainTextResponse("PKCE S256 is required", status_code=400)
        self.stats["authorize"] += 1
        issuer = self.base if self.options["prm"] == "none" else self.issuer
        if self.options["deny"]:
            query = {"error": "access_denied", "state": params.get("state", ""), "iss": issuer}
            return RedirectResponse(f"{redirect_uri}?{urllib.parse.urlencode(query)}", status_code=302)
        code = secrets.token_urlsafe(16)
        self.codes[code] = {
            "client_id": params["client_id"],
            "redirect_uri": redirect_uri,
            "challenge": params["code_challenge"],
            "scope": params.get("scope", ""),
            "resource": params.get("resource"),
        }
        self.scopes_requested.append(params.get("scope", ""))
        query = {"code": code, "state": params.get("state", ""), "iss": issuer}
        return RedirectResponse(f"{redirect_uri}?{urllib.parse.urlencode(query)}", status_code=302)

    def _authenticate(self, request: Request, form: dict[str, str]) -> tuple[str | None, str | None]:
        """Return (client_id, error) after checking the client's authentication method."""
        methods = self.options["authMethods"]
        header = request.headers.get("authorization", "")
        if header.lower().startswith("basic "):
            if "client_secret_basic" not in methods:
                return None, "client_secret_basic is not supported"
            raw = base64.b64decode(header[6:]).decode()
            client_id, _, secret = raw.partition(":")
            client_id, secret = urllib.parse.unquote(client_id), urllib.parse.unquote(secret)
            client = self._client(client_id)
            if client is None or not client.get("secret") or not secrets.compare_digest(client["secret"], secret):
                return None, "bad client credentials"
            self.stats["auth:client_secret_basic"] += 1
            return client_id, None
        if "client_assertion" in form:
            if "private_key_jwt" not in methods:
                return None, "private_key_jwt is not supported"
            try:
                unverified = jwt.decode(form["client_assertion"], options={"verify_signature": False})
                client = self._client(unverified.get("iss", ""))
                if client is None or not client.get("publicKey"):
                    return None, "unknown client"
                claims = jwt.decode(
                    form["client_assertion"],
                    client["publicKey"],
                    algorithms=["RS256", "ES256"],
                    audience=self.issuer,
                )
            except jwt.PyJWTError as exc:
                return None, f"bad client assertion: {exc}"
            self.stats["auth:private_key_jwt"] += 1
            return str(claims["iss"]), None
        client_id = form.get("client_id", "")
        client = self._client(client_id)
        if client is None:
            return None, "unknown client"
        if "client_secret" in form:
            if "client_secret_post" not in methods:
                return None, "client_secret_post is not supported"
            if not client.get("secret") or not secrets.compare_digest(client["secret"], form["client_secret"]):
                return None, "bad client credentials"
            self.stats["auth:client_secret_post"] += 1
            return client_id, None
        if client.get("secret"):
            return None, "this client must authenticate"
        self.stats["auth:none"] += 1
        return client_id, None

    def _issue(self, client_id: str, scope: str, jkt: str | None = None, resource: str | None = None) -> dict[str, Any]:
        grantable = self.options["grantableScopes"]
        if grantable is not None:
            scope = " ".join(s for s in scope.split() if s in grantable)
        token = "at-" + secrets.token_urlsafe(24)
        if self.options["jwt"]:
            token = self._jwt_access_token(client_id, scope, resource)
        bind = jkt is not None and (self.options["dpop"] or {}).get("bind", True)
        self.access[token] = {
            "client_id": client_id,
            "scope": scope,
            "exp": time.time() + self.options["accessTtl"],
            "jkt": jkt if bind else None,
        }
        result: dict[str, Any] = {
            "access_token": token,
            "token_type": "DPoP" if bind else "Bearer",
            "expires_in": self.options["accessTtl"],
            "scope": scope,
        }
        if self.options["refresh"]:
            refresh = "rt-" + secrets.token_urlsafe(24)
            # RFC 9449 §5: a public client's refresh token is bound to the key that obtained it.
            self.refresh[refresh] = {"client_id": client_id, "scope": scope, "jkt": jkt}
            result["refresh_token"] = refresh
        return result

    def _jwt_access_token(self, client_id: str, scope: str, resource: str | None) -> str:
        """An RFC 9068 access token signed with the first of ``jwt.keys``."""
        signer = self.options["jwt"]["keys"][0]
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "sub": "user-" + client_id,
            "client_id": client_id,
            "aud": resource or self.resource,
            "scope": scope,
            "iat": now,
            "exp": now + int(self.options["accessTtl"]),
            "jti": secrets.token_urlsafe(8),
        }
        alg = signer.get("alg", "RS256")
        return jwt.encode(claims, signer["pem"], algorithm=alg, headers={"kid": signer["kid"], "typ": "at+jwt"})

    # ------------------------------------------------------------------ DPoP (RFC 9449)

    def _scheme(self) -> str:
        dpop = self.options["dpop"] or {}
        return str(dpop.get("challenge", "Bearer"))

    def _check_proof(
        self, proof: str | None, method: str, url: str, *, token: str | None = None
    ) -> tuple[dict[str, Any] | None, str]:
        """The proof's claims and its key's thumbprint if it is valid for this request, else (None, why)."""
        if not proof:
            return None, "no DPoP proof"
        self.proofs.append(proof)
        try:
            header = jwt.get_unverified_header(proof)
            if header.get("typ") != "dpop+jwt" or header.get("alg") != "ES256" or "d" in header.get("jwk", {}):
                return None, "bad proof header"
            key = jwt.PyJWK(header["jwk"], algorithm="ES256")
            claims = jwt.decode(proof, key.key, algorithms=["ES256"])
        except (jwt.PyJWTError, KeyError, ValueError) as exc:
            return None, f"bad proof: {type(exc).__name__}"
        if claims.get("htm") != method or claims.get("htu") != url:
            return None, "htm or htu do not match the request"
        if not isinstance(claims.get("iat"), int) or abs(claims["iat"] - time.time()) > _DPOP_WINDOW:
            return None, "iat is outside the window"
        jti = claims.get("jti")
        if not isinstance(jti, str) or jti in self.jtis:
            return None, "jti missing or replayed"
        self.jtis.add(jti)
        if token is not None:
            digest = hashlib.sha256(token.encode()).digest()
            if claims.get("ath") != base64.urlsafe_b64encode(digest).rstrip(b"=").decode():
                return None, "ath does not match the token"
        elif "ath" in claims:
            return None, "a token request's proof has no ath"
        jwk = header["jwk"]
        canonical = json.dumps({k: jwk[k] for k in ("crv", "kty", "x", "y")}, separators=(",", ":"))
        claims["jkt"] = base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).rstrip(b"=").decode()
        return claims, ""

    def _token_proof(self, request: Request, grant: str) -> tuple[str | None, Response | None]:
        """The proof's key thumbprint (None: no proof) or the error response for a token request's proof."""
        dpop = self.options["dpop"]
        proof = request.headers.get("dpop")
        if not dpop or proof is None:
            return None, None
        claims, why = self._check_proof(proof, "POST", self.base + request.url.path)
        if dpop.get("refuseProofs"):
            claims, why = None, "this server refuses every proof"
        if claims is None:
            self.stats["dpop:token:refused"] += 1
            return None, JSONResponse({"error": "invalid_dpop_proof", "error_description": why}, status_code=400)
        nonce = dpop.get("asNonce")
        if dpop.get("rotateAsNonce"):
            nonce = dpop["asNonce"] = f"nonce-{secrets.token_urlsafe(6)}"
        if nonce and claims.get("nonce") != nonce:
            self.stats["dpop:asNonceChallenge"] += 1
            return None, JSONResponse(
                {"error": "use_dpop_nonce", "error_description": "the authorization server wants a nonce"},
                status_code=400,
                headers={"DPoP-Nonce": nonce},
            )
        self.stats[f"dpop:token:{grant}"] += 1
        return str(claims["jkt"]), None

    def _resource_proof(
        self, scheme: str, proof: str | None, method: str, url: str, token: str, grant: dict[str, Any]
    ) -> tuple[str, str | None] | None:
        """None when a DPoP request is good, else (the error, the nonce to send)."""
        dpop = self.options["dpop"] or {}
        if scheme.lower() != "dpop":
            self.stats["dpop:bearerForBound"] += 1
            return "invalid_token", None
        claims, why = self._check_proof(proof, method, url, token=token)
        if claims is None or (grant.get("jkt") and claims["jkt"] != grant["jkt"]):
            self.stats["dpop:resource:refused"] += 1
            self.stats["dpop:refusal:" + (why or "another key")] += 1
            return "invalid_dpop_proof", None
        nonce = dpop.get("rsNonce")
        if nonce and claims.get("nonce") != nonce:
            self.stats["dpop:rsNonceChallenge"] += 1
            return "use_dpop_nonce", nonce
        self.stats[f"dpop:resource:{method}"] += 1
        return None

    def _resource_ok(self, form: dict[str, str]) -> bool:
        resource = form.get("resource")
        if resource is not None:
            self.resources.append(resource)
        extra = (self.options["jwt"] or {}).get("resources", [])
        return resource is None or resource in (self.resource, self.base + "/sse", self.options["prmResource"], *extra)

    async def _token(self, request: Request) -> Response:
        form = {k: str(v) for k, v in (await request.form()).items()}
        grant = form.get("grant_type", "")
        self.stats[f"token:{grant}"] += 1
        if grant == JWT_BEARER_GRANT:
            return self._jwt_bearer(request, form)
        client_id, problem = self._authenticate(request, form)
        if client_id is None:
            return JSONResponse({"error": "invalid_client", "error_description": problem}, status_code=401)
        if not self._resource_ok(form):
            return JSONResponse({"error": "invalid_target"}, status_code=400)
        jkt, refusal = self._token_proof(request, grant)
        if refusal is not None:
            return refusal
        if grant == "authorization_code":
            code = self.codes.pop(form.get("code", ""), None)
            if code is None or code["client_id"] != client_id or code["redirect_uri"] != form.get("redirect_uri"):
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            verifier = form.get("code_verifier", "")
            digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
            if digest != code["challenge"]:
                return JSONResponse({"error": "invalid_grant", "error_description": "PKCE"}, status_code=400)
            return JSONResponse(self._issue(client_id, code["scope"], jkt, form.get("resource")))
        if grant == "refresh_token":
            held = self.refresh.get(form.get("refresh_token", ""))
            if held is None or held["client_id"] != client_id:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            if held.get("jkt") and held["jkt"] != jkt:
                self.stats["dpop:refreshWithoutItsKey"] += 1
                return JSONResponse({"error": "invalid_grant", "error_description": "DPoP key"}, status_code=400)
            del self.refresh[form["refresh_token"]]
            return JSONResponse(self._issue(client_id, held["scope"], jkt, form.get("resource")))
        if grant == "client_credentials":
            return JSONResponse(self._issue(client_id, form.get("scope", ""), jkt, form.get("resource")))
        return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)

    def _jwt_bearer(self, request: Request, form: dict[str, str]) -> Response:
        """The RFC 7523 grant: a JWT from a trusted issuer, for this server, not expired; recorded as it came."""

        def refuse(description: str) -> Response:
            return JSONResponse({"error": "invalid_grant", "error_description": description}, status_code=400)

        header = request.headers.get("authorization", "")
        basic = None
        if header.lower().startswith("basic "):
            raw_id, _, raw_secret = base64.b64decode(header[6:]).decode().partition(":")
            basic = [urllib.parse.unquote(raw_id), urllib.parse.unquote(raw_secret)]
        self.token_requests.append({"form": form, "basic": basic})
        client_id: str | None = None  # RFC 7523: the assertion alone may identify the client
        if form.keys() & {"client_id", "client_assertion"} or header:
            client_id, problem = self._authenticate(request, form)
            if client_id is None:
                return JSONResponse({"error": "invalid_client", "error_description": problem}, status_code=401)
        if not self._resource_ok(form):
            return JSONResponse({"error": "invalid_target"}, status_code=400)
        assertion = form.get("assertion")
        if not assertion:
            return JSONResponse({"error": "invalid_request", "error_description": "no assertion"}, status_code=400)
        try:
            jwt_header = jwt.get_unverified_header(assertion)
            issuer = jwt.decode(assertion, options={"verify_signature": False}).get("iss")
            key = self.options["assertionIssuers"].get(issuer)
            if key is None:
                return refuse(f"assertions of {issuer!r} are not trusted")
            audiences = [self.issuer, self.issuer + "/", self.issuer + "/token"]
            claims = jwt.decode(assertion, key, algorithms=["RS256", "ES256"], audience=audiences)
        except jwt.ExpiredSignatureError:
            return refuse("the assertion has expired")
        except jwt.InvalidAudienceError:
            return refuse("the assertion is not for this authorization server (aud)")
        except jwt.PyJWTError as exc:
            return refuse(f"the assertion is not valid: {type(exc).__name__}")
        if jwt_header.get("typ") == "oauth-id-jag+jwt":
            if claims.get("resource") != self.resource:
                return refuse("the ID-JAG is for another resource")
            if claims.get("client_id") != client_id:
                return refuse("the ID-JAG names another client")
            self.stats["grant:id-jag"] += 1
        else:
            self.stats["grant:workload"] += 1
        return JSONResponse(self._issue(client_id or str(claims.get("sub")), form.get("scope", "")))

    async def _register(self, request: Request) -> Response:
        body = await request.json()
        self.stats["register"] += 1
        client_id = "dyn-" + secrets.token_urlsafe(8)
        method = body.get("token_endpoint_auth_method") or "client_secret_basic"
        secret = secrets.token_urlsafe(16) if method in ("client_secret_basic", "client_secret_post") else None
        info = {**body, "client_id": client_id, "token_endpoint_auth_method": method}
        if secret:
            info["client_secret"] = secret
        self.registered[client_id] = {"secret": secret}
        return JSONResponse(info, status_code=201)


def _public_jwk(key: dict[str, Any]) -> dict[str, Any]:
    """The public JWK of one ``jwt.keys`` entry, with its ``kid``."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    private = load_pem_private_key(key["pem"].encode(), password=None)
    alg = key.get("alg", "RS256")
    algorithm = jwt.get_algorithm_by_name(alg)
    public = json.loads(algorithm.to_jwk(private.public_key()))
    return {**public, "kid": key["kid"], "use": "sig", "alg": alg}


def main(argv: Sequence[str] | None = None) -> None:
    """Run the test authorization server with the demo MCP server behind it."""
    parser = argparse.ArgumentParser(prog="python -m mcp_actors.testing._oauth_server")
    parser.add_argument("--options", default="{}", help="initial options, a JSON object")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    from mcp_actors.demo_server import create_demo_server, serve_http_app

    mcp_app = create_demo_server().streamable_http_app(host="127.0.0.1")
    sse_app = create_demo_server().sse_app(host="127.0.0.1")
    server = OAuthTestServer(json.loads(args.options), mcp_app, sse_app)

    async def serve() -> None:
        await serve_http_app(server, host="127.0.0.1", port=args.port, path="/mcp")  # type: ignore[arg-type]

    try:
        anyio.run(serve, backend="asyncio")
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
