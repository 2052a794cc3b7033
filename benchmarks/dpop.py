"""What DPoP costs a request: one proof per request to a server whose tokens are DPoP-bound.

Measures the CPU of each step a DPoP-bound request adds, in the calling thread, as the
median of five runs (docs/protocol/dpop.md):

* the ES256 signature alone (``cryptography``, OpenSSL): the floor;
* :meth:`DpopKey.proof` for a resource request (claims, JSON, base64url, signature; the
  access token's hash is worked out once per token) and for a token request;
* :meth:`ServerAuth.resource_headers`, what the HTTP sender calls per request: with a bearer
  token (DPoP off: nothing is signed) and with a DPoP-bound one.

    python -m benchmarks.dpop [--iterations N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import httpx2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from mcp_actors._auth.dpop import DpopKey, TokenBinding
from mcp_actors._auth.oauth import OAuthTarget, ServerAuth
from mcp_actors._auth.token_store import MemoryTokenStore

__all__ = ["main"]

_URL = "https://mcp.example.com/mcp"
_TOKEN = "eyJhbGciOiJFUzI1NiJ9." + "x" * 600 + ".sig"  # a JWT access token's usual size


def _per_call(step: Callable[[], object], iterations: int) -> float:
    """Median CPU microseconds per call of ``step`` over five runs."""
    runs = []
    for _ in range(5):
        cpu = time.process_time()
        for _ in range(iterations):
            step()
        runs.append((time.process_time() - cpu) / iterations * 1e6)
    return statistics.median(runs)


def _auth(bound: bool) -> ServerAuth:
    target = OAuthTarget(server_id="bench", server_name="bench", url=_URL)
    auth = ServerAuth(target, MemoryTokenStore().storage_for("bench", server_url=_URL))
    if bound:
        auth.dpop.key = DpopKey.generate()
        auth.dpop.bind(TokenBinding(jkt=auth.dpop.key.jkt))
    return auth


def main(argv: list[str] | None = None) -> None:
    """Print the CPU per call of each step."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dpop", description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=5_000)
    args = parser.parse_args(argv)
    n = args.iterations
    raw = ec.generate_private_key(ec.SECP256R1())
    algorithm = ec.ECDSA(hashes.SHA256())
    message = b"x" * 400
    key = DpopKey.generate()
    bearer, bound = _auth(False), _auth(True)
    bound.dpop.nonces.remember("https://mcp.example.com", httpx2.Headers({"DPoP-Nonce": "n-1"}))
    rows = [
        ("ES256 signature alone (cryptography)", lambda: raw.sign(message, algorithm)),
        ("DpopKey.proof, resource request", lambda: key.proof("POST", _URL, access_token=_TOKEN, nonce="n")),
        ("DpopKey.proof, token request", lambda: key.proof("POST", "https://as.example.com/token")),
        ("resource_headers, bearer token (DPoP off)", lambda: bearer.resource_headers("POST", _URL, _TOKEN)),
        ("resource_headers, DPoP-bound token", lambda: bound.resource_headers("POST", _URL, _TOKEN)),
    ]
    for name, step in rows:
        print(f"{name:45s} {_per_call(step, n):8.2f} us of CPU per call", flush=True)


if __name__ == "__main__":
    main()
