"""Loopback HTTP servers a test module's tests take turns on: each test brings its own app.

Starting a uvicorn server in a thread (:func:`testkit.serve_in_thread`) and building the demo
server's apps costs a few tenths of a second of wall time per test, and stopping it another
tenth or two (uvicorn looks at its exit flag ten times a second). The tests of the OAuth flows
each need a fresh authorization server (its options, its tokens, its counters), not a fresh
socket: a :class:`Slot` is one such server kept for the module, serving whichever app the test
holding it installed. Served the same way as ``serve_in_thread`` (uvicorn on asyncio in a
thread of the test process, a real socket), so the client under test still shares nothing
with the server but the socket.

A module that uses :func:`slot` has the :func:`http_slots` fixture active (a conftest or the
module imports it): it stops the module's servers after its last test.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import pytest
import trio

__all__ = ["Slot", "http_slots", "loopback_client", "slot"]


class Slot:
    """One uvicorn server in a thread, on a free loopback port, serving the app of the test that holds it.

    With ``demo=True`` the thread also builds the demo server's streamable HTTP and SSE apps
    (``demo_apps``) and runs the streamable app's lifespan (its session manager) for the life
    of the server, as an app that wraps them (the test authorization server) would have.
    """

    def __init__(self, *, demo: bool) -> None:
        import uvicorn

        self.demo = demo
        self.demo_apps: tuple[Any, Any] | None = None
        self.app: Any = None
        self.busy = False
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.origin = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        config = uvicorn.Config(
            self,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="on" if demo else "off",
            timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
        self.failure: list[BaseException] = []
        self._thread = threading.Thread(target=self._serve, name=f"test-http-slot:{self.origin}", daemon=True)

    def _serve(self) -> None:
        import asyncio

        try:
            if self.demo:
                from mcp_actors.demo_server import create_demo_server

                self.demo_apps = (
                    create_demo_server().streamable_http_app(host="127.0.0.1"),
                    create_demo_server().sse_app(host="127.0.0.1"),
                )
            asyncio.run(self._server.serve(sockets=[self._sock]))
        except BaseException as exc:  # reported by start and stop
            self.failure.append(exc)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            assert self.demo_apps is not None
            await self.demo_apps[0](scope, receive, send)
            return
        app = self.app
        if app is None:  # between tests: nobody's server
            await send({"type": "http.response.start", "status": 503, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await app(scope, receive, send)

    async def start(self) -> None:
        self._thread.start()
        with trio.fail_after(30):
            while not self._server.started:
                assert self._thread.is_alive(), f"the test HTTP server did not start: {self.failure!r}"
                await trio.sleep(0.01)

    def stop(self) -> None:
        if self._thread.ident is None:  # never started
            self._sock.close()
            return
        self._server.should_exit = True
        self._thread.join(30.0)
        self._sock.close()
        assert not self._thread.is_alive(), "the test HTTP server did not stop within 30 s"
        assert not self.failure, f"the test HTTP server failed: {self.failure!r}"


_LOOPBACK_TLS = ssl.create_default_context()
"""The TLS context of :func:`loopback_client`: made once, never used (loopback is plain http)."""


def loopback_client(**options: Any) -> httpx2.AsyncClient:
    """An HTTP client for the test's own servers on loopback (their controls, counters, redirects).

    As ``httpx2.AsyncClient(**options)``, with one TLS context for all: a client left to make
    its own loads the CA bundle, some 20 ms of CPU each time, for a plain-http request.
    """
    return httpx2.AsyncClient(verify=_LOOPBACK_TLS, **options)


_SLOTS: list[Slot] | None = None
"""The servers of the running module (None: no module made them available)."""


@pytest.fixture(scope="module", autouse=True)
def http_slots() -> Iterator[list[Slot]]:
    """The module's servers, started on first use, stopped after its last test."""
    global _SLOTS
    slots: list[Slot] = []
    _SLOTS = slots
    try:
        yield slots
    finally:
        _SLOTS = None
        for each in slots:
            each.stop()


@contextlib.asynccontextmanager
async def slot(*, demo: bool) -> AsyncIterator[Slot]:
    """A free server of the module (a new one if all are held), for the block; its app is the caller's to set."""
    assert _SLOTS is not None, "a module using sharedhttp.slot needs the http_slots fixture"
    held = next((each for each in _SLOTS if not each.busy and each.demo == demo), None)
    if held is None:
        held = Slot(demo=demo)
        _SLOTS.append(held)
        await held.start()
    assert not held.failure, f"the test HTTP server failed: {held.failure!r}"
    held.busy = True
    try:
        yield held
    finally:
        held.app = None
        held.busy = False
