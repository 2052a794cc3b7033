"""Three ``mcp-actors serve`` replicas behind haproxy (round robin, no stickiness), one killed and restarted.

Real processes and real parts: three replicas sharing a session key (``--session-key-file``)
and a redis-server (``--redis-url``), each with its own upstream (``_ledger_server.py``, which
writes down every call it executes), behind haproxy running ``deploy/haproxy.cfg`` itself.
Three clients call through it at once: the SDK's ``Client`` with a 2025-11-25 session, the
SDK's ``Client`` at 2026-07-28 (stateless), and fastmcp's ``Client`` (on asyncio, in a
thread). While calls are in flight on replica 2 it is SIGKILLed, then restarted.

What must hold: no call a client saw succeed went unexecuted (every success is in a ledger,
and no call ran twice); the 2025 session is one session from start to end, continued by the
other replicas and by the restarted one (which never saw it); the stateless client goes on.
The Kubernetes manifests are checked for what they can say: they parse, and name the
options, ports, paths and environment the command accepts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import attrs
import httpx2
import trio
import yaml
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from rediskit import free_port, running_redis

from mcp_actors.records import McpServerRecord, ServerConfig, ServerType
from mcp_actors.store import ConfigStore

ROOT = Path(__file__).resolve().parents[2]
HAPROXY_CFG = ROOT / "deploy" / "haproxy.cfg"
LEDGER_SERVER = Path(__file__).with_name("_ledger_server.py")
_SCRIPT = Path(sys.executable).with_name("mcp-actors")
CLI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "mcp_actors"]
BOUND = 60.0
"""Seconds any one wait may take (a replica's start, haproxy's, a call) on a loaded machine."""
CALL_SECONDS = 0.3
"""How long each call runs upstream: long enough that calls are in flight when a replica dies."""
KEY = "0123456789abcdef" * 4


@attrs.define(eq=False)
class Replica:
    """One ``mcp-actors serve`` process: its port, its upstream's ledger, how to start it again."""

    index: int
    port: int
    ledger: Path
    argv: list[str]
    env: dict[str, str]
    process: trio.Process | None = None

    async def start(self) -> None:
        """Start it and wait until it listens (it prints its URL once it does)."""
        process = await trio.lowlevel.open_process(
            self.argv, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True
        )
        self.process = process
        assert process.stdout is not None
        line = b""
        with trio.fail_after(BOUND):
            while not line.endswith(b"\n"):
                chunk = await process.stdout.receive_some(1)
                assert chunk, f"replica {self.index} ended before printing its URL"
                line += chunk
        assert line.decode().strip() == f"http://127.0.0.1:{self.port}/mcp"

    def kill(self) -> None:
        """SIGKILL the gateway process (its upstream then ends as its stdin closes)."""
        assert self.process is not None
        self.process.kill()

    async def stop(self) -> None:
        """End it and everything it started (its process group), whatever its state."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with trio.CancelScope(shield=True), trio.move_on_after(BOUND):
            await self.process.wait()

    def executed(self) -> list[str]:
        """The tokens its upstreams wrote down (every process it ran, before and after a restart)."""
        lines = self.ledger.read_text().splitlines() if self.ledger.exists() else []
        return [line.split()[0] for line in lines]

    def executed_at(self) -> dict[str, float]:
        """Each token its upstreams wrote down, and when (Unix time)."""
        lines = self.ledger.read_text().splitlines() if self.ledger.exists() else []
        return {token: float(at) for token, at in (line.split() for line in lines)}


@contextlib.asynccontextmanager
async def cluster(tmp_path: Path, redis_url: str) -> AsyncIterator[tuple[str, list[Replica]]]:
    """Three replicas and haproxy in front; yields the balancer's URL and the replicas."""
    key_file = tmp_path / "session.key"
    key_file.write_text(KEY + "\n")
    replicas: list[Replica] = []
    for index in (1, 2, 3):
        home = tmp_path / f"replica{index}"
        home.mkdir()
        ledger = home / "ledger.txt"
        config = home / "cfg.json"
        record = McpServerRecord(
            name="ledger",
            type=ServerType.STDIO,
            config=ServerConfig(command=sys.executable, args=(str(LEDGER_SERVER), str(ledger)), ping_interval=0),
        )
        ConfigStore(config).save([record])
        port = free_port()
        argv = [*CLI, "serve", "--port", str(port), "--grace", "1", "--config", str(config)]
        argv += ["--session-key-file", str(key_file), "--redis-url", redis_url]
        env = {**os.environ, "MCP_ACTORS_CONFIG": str(config), "MCP_ACTORS_STATE_DIR": str(home / "state")}
        replicas.append(Replica(index, port, ledger, argv, env))
    lb_port = free_port()
    haproxy_env = {
        **os.environ,
        "MCP_LB_BIND": f"127.0.0.1:{lb_port}",
        **{f"MCP_GATEWAY_{r.index}": f"127.0.0.1:{r.port}" for r in replicas},
    }
    haproxy = shutil.which("haproxy")
    assert haproxy, "haproxy is not installed: apt-get install haproxy (README: Run the tests)"
    balancer: trio.Process | None = None
    try:
        async with trio.open_nursery() as nursery:
            for replica in replicas:
                nursery.start_soon(replica.start)
        balancer = await trio.lowlevel.open_process(
            [haproxy, "-db", "-f", str(HAPROXY_CFG)], env=haproxy_env, stdout=subprocess.DEVNULL
        )
        url = f"http://127.0.0.1:{lb_port}/mcp"
        await _until_every_replica_answers(url, len(replicas))
        yield url, replicas
    finally:
        with trio.CancelScope(shield=True):
            if balancer is not None:
                balancer.kill()
                with trio.move_on_after(BOUND):
                    await balancer.wait()
            for replica in replicas:
                await replica.stop()


async def _until_every_replica_answers(url: str, count: int) -> None:
    """Poll through the balancer until ``count`` answers in a row succeed (every replica's turn came)."""
    body = '{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{}}}'
    in_a_row = 0
    async with httpx2.AsyncClient() as http:
        with trio.fail_after(BOUND):
            while in_a_row < count:
                try:
                    answer = await http.post(
                        url,
                        content=body,
                        headers={
                            "content-type": "application/json",
                            "accept": "application/json",
                            "mcp-protocol-version": "2026-07-28",
                            "mcp-method": "server/discover",
                        },
                    )
                    in_a_row = in_a_row + 1 if answer.status_code in (200, 400) else 0
                except httpx2.TransportError:
                    in_a_row = 0
                if in_a_row < count:
                    await trio.sleep(0.1)


@attrs.define(eq=False)
class Tally:
    """What one client saw: the tokens its calls succeeded and failed with."""

    name: str
    succeeded: list[str] = attrs.field(factory=list)
    failed: list[str] = attrs.field(factory=list)
    session_ids: set[str] = attrs.field(factory=set)
    """Every ``Mcp-Session-Id`` its requests carried (one session: one id)."""
    initializes: int = 0
    dropped: int = 0
    """Requests whose connection dropped with no answer (taken as failed calls)."""


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in getattr(result, "content", []))


class Phase:
    """The phase a call starts in: its token says so (``early``, ``down``, ``late``)."""

    def __init__(self) -> None:
        self.name = "early"
        self.stop = trio.Event()


async def _sdk_worker(client: Client, tally: Tally, phase: Phase, worker: int) -> None:
    n = 0
    while not phase.stop.is_set():
        n += 1
        token = f"{tally.name}-{phase.name}-{worker}-{n}"
        try:
            with trio.fail_after(BOUND):
                result = await client.call_tool("ledger__record", {"token": token, "seconds": CALL_SECONDS})
        except Exception:
            tally.failed.append(token)
            await trio.sleep(0.05)
            continue
        if result.is_error or _text(result) != token:
            tally.failed.append(token)
        else:
            tally.succeeded.append(token)


class _DroppedIsFailed(httpx2.AsyncBaseTransport):
    """A request whose connection dropped before any answer is answered 502 (a failed call).

    The SDK's client ends itself when a connection drops under a request; a client that goes
    on (a retrying one, a browser) takes it as that request failing, which is what it is.
    """

    def __init__(self, tally: Tally) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._tally = tally

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            return await self._inner.handle_async_request(request)
        except httpx2.RemoteProtocolError:
            self._tally.dropped += 1
            return httpx2.Response(502, request=request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def _watching(tally: Tally) -> httpx2.AsyncClient:
    """An HTTP client that notes the session id of every request, and every ``initialize``."""

    async def on_request(request: httpx2.Request) -> None:
        sid = request.headers.get("mcp-session-id")
        if sid is not None:
            tally.session_ids.add(sid)
        if request.method == "POST" and b'"initialize"' in request.content:
            tally.initializes += 1

    return httpx2.AsyncClient(
        timeout=httpx2.Timeout(BOUND), event_hooks={"request": [on_request]}, transport=_DroppedIsFailed(tally)
    )


async def _sdk_client(url: str, tally: Tally, phase: Phase, mode: str) -> None:
    async with _watching(tally) as http:
        transport = streamable_http_client(url, http_client=http, terminate_on_close=False)
        async with Client(transport, mode=mode) as client:  # type: ignore[arg-type]
            async with trio.open_nursery() as nursery:
                for worker in (1, 2):
                    nursery.start_soon(_sdk_worker, client, tally, phase, worker)


def _fastmcp_client(url: str, tally: Tally, phase: Phase, stop: Callable[[], bool]) -> None:
    """fastmcp's client on its own asyncio loop (it needs asyncio): calls until ``stop()``."""
    from fastmcp import Client as FastClient

    async def run() -> None:
        async with FastClient(url, timeout=BOUND) as client:

            async def worker(number: int) -> None:
                n = 0
                while not stop():
                    n += 1
                    token = f"{tally.name}-{phase.name}-{number}-{n}"
                    try:
                        result = await client.call_tool(
                            "ledger__record", {"token": token, "seconds": CALL_SECONDS}, raise_on_error=False
                        )
                    except Exception:
                        tally.failed.append(token)
                        await asyncio.sleep(0.05)
                        continue
                    if result.is_error or _text(result) != token:
                        tally.failed.append(token)
                    else:
                        tally.succeeded.append(token)

            await asyncio.gather(worker(1), worker(2))

    asyncio.run(run())


async def test_three_replicas_behind_haproxy_survive_a_killed_replica(tmp_path: Path) -> None:
    async with running_redis(tmp_path / "redis") as redis_url, cluster(tmp_path, redis_url) as (url, replicas):
        victim = replicas[1]
        phase = Phase()
        legacy, modern, fast = Tally("legacy"), Tally("modern"), Tally("fastmcp")
        tallies = (legacy, modern, fast)
        started = time.monotonic()
        async with trio.open_nursery() as nursery:
            # However this block ends, the clients stop (fastmcp's thread cannot be cancelled, only told).
            nursery.start_soon(_stop_when_cancelled, phase)
            nursery.start_soon(_sdk_client, url, legacy, phase, "legacy")
            nursery.start_soon(_sdk_client, url, modern, phase, "2026-07-28")
            nursery.start_soon(as_thread_task(_fastmcp_client, url, fast, phase, lambda: phase.stop.is_set()))
            with trio.fail_after(BOUND):
                # Kill replica 2 while it runs a call that cannot have been answered yet: its
                # upstream wrote it down less than CALL_SECONDS ago and answers only after them.
                while True:
                    await trio.sleep(0.02)
                    now = time.time()
                    running = [t for t, at in victim.executed_at().items() if now - at < CALL_SECONDS / 2]
                    if all(t.succeeded for t in tallies) and running:
                        break
            victim.kill()
            phase.name = "down"
            killed_with = running
            with trio.fail_after(BOUND):
                await victim.process.wait()  # type: ignore[union-attr]
                await trio.sleep(1.0)  # calls go on with two replicas
                await victim.start()
            phase.name = "late"
            with trio.fail_after(BOUND):
                # Until the restarted replica (which never saw the session) has served each SDK client.
                await _until(
                    lambda: all(
                        any(t.startswith(f"{name}-late") for t in victim.executed()) for name in ("legacy", "modern")
                    )
                )
                await trio.sleep(0.5)
            phase.stop.set()
        elapsed = time.monotonic() - started

        executed = [token for replica in replicas for token in replica.executed()]
        everywhere = set(executed)
        for tally in tallies:
            # No call reported as succeeded that did not run; every late call succeeded.
            assert set(tally.succeeded) <= everywhere, set(tally.succeeded) - everywhere
            assert any(t.split("-")[1] == "late" for t in tally.succeeded), tally
            assert not [t for t in tally.failed if t.split("-")[1] == "late"], tally.failed
        assert len(executed) == len(everywhere), "a call ran twice"
        # The calls running on the killed replica were not reported as successes.
        succeeded = {t for tally in tallies for t in tally.succeeded}
        assert killed_with and not set(killed_with) & succeeded
        # One 2025 session from start to end, continued by every replica, the restarted one too.
        assert legacy.initializes == 1 and len(legacy.session_ids) == 1
        for replica in replicas:
            assert any(t.startswith("legacy-") for t in replica.executed()), replica.index
        # The stateless client never had a session.
        assert modern.initializes == 0 and not modern.session_ids
        seen = [f"{t.name}: {len(t.succeeded)} ok, {len(t.failed)} failed, {t.dropped} dropped;" for t in tallies]
        print(
            f"\nscale-out: {elapsed:.1f}s, {len(executed)} calls executed; "
            + " ".join(seen)
            + f" in flight on the killed replica: {len(killed_with)}"
        )


async def _stop_when_cancelled(phase: Phase) -> None:
    try:
        await phase.stop.wait()
    finally:
        phase.stop.set()


async def _until(condition: Callable[[], bool]) -> None:
    """Poll ``condition`` (it reads files other processes write: no event to wait on); bound by the caller."""
    while not condition():  # noqa: ASYNC110
        await trio.sleep(0.05)


def as_thread_task(function: Callable[..., None], *args: Any) -> Callable[[], Any]:
    """``function(*args)`` in a worker thread, as a trio task."""

    async def run() -> None:
        await trio.to_thread.run_sync(lambda: function(*args))

    return run


def test_the_kubernetes_manifests_name_what_the_command_accepts() -> None:
    """They parse; the replicas run `mcp-actors serve` with options it has; probes, ports and env agree."""
    from typer.main import get_command

    from mcp_actors.cli._app import app
    from mcp_actors.serve._sessions import SESSION_KEY_ENV
    from mcp_actors.serve._store import REDIS_URL_ENV

    serve_command = get_command(app).commands["serve"]  # type: ignore[attr-defined]
    options = {opt for param in serve_command.params for opt in getattr(param, "opts", [])}
    paths = sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))
    documents = [doc for path in paths for doc in yaml.safe_load_all(path.read_text()) if doc]
    named = {(doc["kind"], doc["metadata"]["name"]): doc for doc in documents}
    deployment, service = named["Deployment", "mcp-gateway"], named["Service", "mcp-gateway"]
    assert deployment["spec"]["replicas"] >= 2
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    assert args[0] == "serve"
    assert {a for a in args if a.startswith("--")} <= options
    port = int(args[args.index("--port") + 1])
    assert container["ports"][0]["containerPort"] == port
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port}
    env = {item["name"]: item for item in container["env"]}
    secret = env[SESSION_KEY_ENV]["valueFrom"]["secretKeyRef"]
    assert secret["key"] in named["Secret", secret["name"]]["stringData"]
    redis_url = env[REDIS_URL_ENV]["value"]
    redis_host, redis_port = redis_url.split("//")[1].split("/")[0].split(":")
    assert named["Service", redis_host]["spec"]["ports"][0]["port"] == int(redis_port)
    redis_option = next(p for p in serve_command.params if "--redis-url" in getattr(p, "opts", []))
    assert redis_option.envvar == REDIS_URL_ENV  # type: ignore[attr-defined]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"][0]["targetPort"] == port
    assert "sessionAffinity" not in service["spec"] or service["spec"]["sessionAffinity"] == "None"
