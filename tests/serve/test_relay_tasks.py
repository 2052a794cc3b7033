"""Task-augmented calls through the gateway: 2026-07-28 (the tasks extension) and 2025-11-25 (the capability).

In process and on loopback: the upstream is the conformance suite's fixture server (its task
tools: ``slow_compute``, ``confirm_delete``, ``protocol_error_job``; ``greet`` never a task),
served in memory under a stdio record the runtime speaks 2026-07-28 to; the gateway serves
real sockets on 127.0.0.1. The client is raw JSON-RPC over httpx2 (the SDK's client has no
task API at either revision): at 2026-07-28 declaring the extension in each request's
``_meta`` envelope, at 2025-11-25 a session whose ``tools/call`` carries ``task``.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx2
import mcp.types as types
import trio
from mcp.server.mcpserver import MCPServer

from mcp_actors._config.record import McpServerRecord, ServerType
from mcp_actors._wire.transports import MemoryParams, StdioParams, TransportParams, register_transport_kind
from mcp_actors.runtime import open_runtime
from mcp_actors.serve import HttpGateway, serve_http
from mcp_actors.testing import demo_server_command
from mcp_actors.testing.conformance_server import create_conformance_server

BOUND = 30.0
"""Upper bound of any one step: real sockets, a loaded machine."""
VERSION = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS: dict[str, Any] = {"elicitation": {}, "extensions": {TASKS: {}}}


def own_name(server: str, name: str) -> str:
    """Each tool under its own name (the gateway in front of one server)."""
    return name


@contextlib.asynccontextmanager
async def fixture_gateway(
    tmp_path: Path, make: Callable[[], Any] = create_conformance_server, protocol: str = "auto"
) -> AsyncIterator[HttpGateway]:
    """A gateway in front of one in-memory server (the conformance fixture), tools named as their own."""

    def from_record(record: McpServerRecord) -> TransportParams:
        return MemoryParams(server=make)

    register_transport_kind(ServerType.STDIO, from_record)
    try:
        async with open_runtime(tmp_path / "cfg.json") as runtime:
            for record in await runtime.service.list():
                await runtime.service.remove(record.id)
            argv = demo_server_command()
            entry = {"type": "stdio", "command": argv[0], "args": argv[1:], "protocol": protocol}
            await runtime.service.add_json(json.dumps({"mcpServers": {"fixture": entry}}))
            async with trio.open_nursery() as nursery:
                serve = functools.partial(serve_http, runtime.service, naming=own_name)
                gateway: HttpGateway = await nursery.start(serve)
                yield gateway
                with trio.fail_after(BOUND):
                    await gateway.stop(1.0)
    finally:
        register_transport_kind(ServerType.STDIO, StdioParams.from_record)


class TaskPoller:
    """A client of the gateway that polls a task (``post`` is the subclass's request)."""

    async def post(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    async def until(self, task_id: str, statuses: set[str]) -> dict[str, Any]:
        """Poll ``tasks/get`` until the task is in one of ``statuses``; its last answer."""
        with trio.fail_after(BOUND):
            while True:
                got: dict[str, Any] = (await self.post("tasks/get", {"taskId": task_id}))["result"]
                if got["status"] in statuses:
                    return got
                await trio.sleep(0.05)


class Wire(TaskPoller):
    """Raw 2026-07-28 requests to the gateway, with the extension declared (or not)."""

    def __init__(self, http: httpx2.AsyncClient, url: str) -> None:
        self.http, self.url, self.ids = http, url, 0

    async def post(
        self, method: str, params: dict[str, Any], *, caps: dict[str, Any] | None = None, name: str | None = None
    ) -> dict[str, Any]:
        self.ids += 1
        meta = {
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientCapabilities": WITH_TASKS if caps is None else caps,
        }
        headers = {
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": VERSION,
            "mcp-method": method,
        }
        routed = name if name is not None else params.get("name", params.get("taskId"))
        if routed is not None:
            headers["mcp-name"] = routed
        body = {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": {**params, "_meta": meta}}
        with trio.fail_after(BOUND):
            answer = await self.http.post(self.url, json=body, headers=headers)
        text = answer.text
        if answer.headers.get("content-type", "").startswith("text/event-stream"):
            text = [line[5:] for line in text.splitlines() if line.startswith("data:")][-1]
        message: dict[str, Any] = json.loads(text)
        return message


@contextlib.asynccontextmanager
async def wire(tmp_path: Path) -> AsyncIterator[tuple[Wire, HttpGateway]]:
    async with fixture_gateway(tmp_path) as gateway, httpx2.AsyncClient(timeout=BOUND) as http:
        w = Wire(http, gateway.url)
        listed = (await w.post("tools/list", {}))["result"]["tools"]  # as a client does before it calls
        assert "slow_compute" in {tool["name"] for tool in listed}
        yield w, gateway


async def test_the_extension_is_offered_and_a_task_tool_answers_with_a_task_of_the_gateways(tmp_path: Path) -> None:
    async with wire(tmp_path) as (w, gateway):
        discovered = (await w.post("server/discover", {}))["result"]
        assert TASKS in discovered["capabilities"]["extensions"]

        answer = await w.post("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0.3}})
        assert "result" in answer, answer
        created = answer["result"]
        assert created["resultType"] == "task"
        assert created["status"] == "working"
        assert {"createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"} <= created.keys()
        done = await w.until(created["taskId"], {"completed", "failed", "cancelled"})
        assert done["status"] == "completed"
        assert done["result"]["content"][0]["text"] == "computed slow_compute in 0.3 s"
        assert not gateway.gateway.relays.callers  # the runtime call ended with the task

        plain = (await w.post("tools/call", {"name": "greet", "arguments": {"name": "Ada"}}))["result"]
        assert plain["resultType"] == "complete"
        assert plain["content"][0]["text"] == "Hello, Ada!"


async def test_a_client_without_the_extension_gets_the_result_of_a_task_tool_plainly(tmp_path: Path) -> None:
    async with wire(tmp_path) as (w, _gateway):
        answer = await w.post("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0.2}}, caps={})
        assert answer["result"]["resultType"] == "complete"
        assert answer["result"]["content"][0]["text"] == "computed slow_compute in 0.2 s"


async def test_input_requests_of_a_task_are_inline_and_answered_by_tasks_update(tmp_path: Path) -> None:
    async with wire(tmp_path) as (w, _gateway):
        created = await w.post("tools/call", {"name": "confirm_delete", "arguments": {"filename": "a.txt"}})
        task_id = created["result"]["taskId"]
        waiting = await w.until(task_id, {"input_required"})
        ((key, request),) = waiting["inputRequests"].items()
        assert request["method"] == "elicitation/create"
        assert "a.txt" in request["params"]["message"]
        answer = {"action": "accept", "content": {"confirm": True}}
        acked = (await w.post("tasks/update", {"taskId": task_id, "inputResponses": {key: answer}}))["result"]
        assert acked.keys() == {"resultType", "_meta"}  # an empty acknowledgement
        done = await w.until(task_id, {"completed", "failed", "cancelled"})
        assert done["status"] == "completed"
        assert done["result"]["content"][0]["text"] == "deleted a.txt"


async def test_a_failed_upstream_task_is_failed_with_its_error_inline(tmp_path: Path) -> None:
    async with wire(tmp_path) as (w, _gateway):
        created = (await w.post("tools/call", {"name": "protocol_error_job", "arguments": {}}))["result"]
        done = await w.until(created["taskId"], {"completed", "failed", "cancelled"})
        assert done["status"] == "failed"
        assert "protocol_error_job crashed on purpose" in done["error"]["message"]


async def test_tasks_cancel_ends_the_runtime_call(tmp_path: Path) -> None:
    async with wire(tmp_path) as (w, gateway):
        created = (await w.post("tools/call", {"name": "slow_compute", "arguments": {"seconds": 600}}))["result"]
        task_id = created["taskId"]
        assert gateway.gateway.relays.callers  # the call runs in the gateway
        assert "result" in await w.post("tasks/cancel", {"taskId": task_id})
        done = await w.until(task_id, {"cancelled"})
        assert "result" not in done
        with trio.fail_after(BOUND):
            while gateway.gateway.relays.callers:  # the runtime call, hence the upstream task, ends  # noqa: ASYNC110
                await trio.sleep(0.02)
        again = await w.post("tasks/cancel", {"taskId": task_id})  # an ended task stays as it ended
        assert "result" in again
        assert (await w.post("tasks/get", {"taskId": task_id}))["result"]["status"] == "cancelled"


async def test_tasks_methods_refuse_what_the_extension_refuses(tmp_path: Path) -> None:
    async with wire(tmp_path) as (w, _gateway):
        created = (await w.post("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0.1}}))["result"]
        task_id = created["taskId"]
        undeclared = await w.post("tasks/get", {"taskId": task_id}, caps={})
        assert undeclared["error"]["code"] == -32021
        unknown = await w.post("tasks/get", {"taskId": "no-such-task"})
        assert unknown["error"]["code"] == -32602
        misrouted = await w.post("tasks/get", {"taskId": task_id}, name="another-task")
        assert misrouted["error"]["code"] == -32020
        required = await w.post("tools/call", {"name": "failing_job", "arguments": {}}, caps={"elicitation": {}})
        assert required["error"]["code"] == -32021  # the upstream's refusal: the tool requires a task


# ---------------------------------------------------------------------------------------- 2025-11-25

LEGACY = "2025-11-25"


class Session(TaskPoller):
    """A raw 2025-11-25 session with the gateway (the SDK's client has no task API)."""

    def __init__(self, http: httpx2.AsyncClient, url: str) -> None:
        self.http, self.url, self.ids, self.headers = http, url, 0, {"accept": "application/json, text/event-stream"}
        self.asked: list[dict[str, Any]] = []
        """The gateway's requests to this client, as received."""

    async def open(self, capabilities: dict[str, Any]) -> dict[str, Any]:
        init = {"protocolVersion": LEGACY, "capabilities": capabilities, "clientInfo": {"name": "t", "version": "0"}}
        answer = await self.http.post(self.url, json=self._body("initialize", init), headers=self.headers)
        self.headers = {**self.headers, "mcp-session-id": answer.headers["mcp-session-id"]}
        self.headers["mcp-protocol-version"] = LEGACY
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await self.http.post(self.url, json=note, headers=self.headers)
        result: dict[str, Any] = _last_message(answer.text, answer.headers)["result"]
        return result

    def _body(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.ids += 1
        return {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params}

    async def post(self, method: str, params: dict[str, Any], answers: dict[str, Any] | None = None) -> dict[str, Any]:
        """One request; a request of the gateway's on its stream is answered with ``answers[method]``."""
        body = self._body(method, params)
        with trio.fail_after(BOUND):
            async with self.http.stream("POST", self.url, json=body, headers=self.headers) as answer:
                if not answer.headers.get("content-type", "").startswith("text/event-stream"):
                    message: dict[str, Any] = json.loads(await answer.aread())
                    return message
                async for line in answer.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    message = json.loads(line[5:])
                    if message.get("id") == body["id"] and "method" not in message:
                        return message
                    if "method" in message and "id" in message:
                        assert answers is not None, message
                        self.asked.append(message)
                        reply = {"jsonrpc": "2.0", "id": message["id"], "result": answers[message["method"]]}
                        await self.http.post(self.url, json=reply, headers=self.headers)
        raise AssertionError(f"no answer to {method}")


def _last_message(text: str, headers: Any) -> dict[str, Any]:
    if headers.get("content-type", "").startswith("text/event-stream"):
        text = [line[5:] for line in text.splitlines() if line.startswith("data:")][-1]
    message: dict[str, Any] = json.loads(text)
    return message


@contextlib.asynccontextmanager
async def session(tmp_path: Path, capabilities: dict[str, Any]) -> AsyncIterator[tuple[Session, dict[str, Any]]]:
    async with fixture_gateway(tmp_path) as gateway, httpx2.AsyncClient(timeout=BOUND) as http:
        s = Session(http, gateway.url)
        initialized = await s.open(capabilities)
        listed = (await s.post("tools/list", {}))["result"]["tools"]
        assert {tool["name"]: tool.get("execution") for tool in listed}["greet"] == {"taskSupport": "optional"}
        yield s, initialized


async def test_2025_a_task_augmented_call_is_a_task_of_the_gateways(tmp_path: Path) -> None:
    async with session(tmp_path, {}) as (s, initialized):
        assert initialized["capabilities"]["tasks"]["requests"] == {"tools": {"call": {}}}
        args = {"name": "slow_compute", "arguments": {"seconds": 0.3}, "task": {"ttl": 60_000}}
        created = (await s.post("tools/call", args))["result"]["task"]
        assert created["status"] == "working"
        assert created["ttl"] == 60_000
        listed = (await s.post("tasks/list", {}))["result"]["tasks"]
        assert [task["taskId"] for task in listed] == [created["taskId"]]
        result = (await s.post("tasks/result", {"taskId": created["taskId"]}))["result"]  # waits for the end
        assert result["content"][0]["text"] == "computed slow_compute in 0.3 s"
        assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": created["taskId"]}
        assert (await s.post("tasks/get", {"taskId": created["taskId"]}))["result"]["status"] == "completed"
        again = await s.post("tasks/cancel", {"taskId": created["taskId"]})
        assert again["error"]["code"] == -32602  # an ended task cannot be cancelled


async def test_2025_a_question_of_the_call_is_input_required_and_asked_on_tasks_result(tmp_path: Path) -> None:
    async with session(tmp_path, {"elicitation": {}}) as (s, _init):
        args = {"name": "confirm_delete", "arguments": {"filename": "b.txt"}, "task": {}}
        created = (await s.post("tools/call", args))["result"]["task"]
        await s.until(created["taskId"], {"input_required"})
        answers = {"elicitation/create": {"action": "accept", "content": {"confirm": True}}}
        result = (await s.post("tasks/result", {"taskId": created["taskId"]}, answers))["result"]
        assert result["content"][0]["text"] == "deleted b.txt"
        ((asked,),) = [s.asked]
        assert asked["params"]["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": created["taskId"]}


async def test_2025_tasks_cancel_cancels_the_call_and_tasks_are_per_session(tmp_path: Path) -> None:
    async with fixture_gateway(tmp_path) as gateway, httpx2.AsyncClient(timeout=BOUND) as http:
        one, other = Session(http, gateway.url), Session(http, gateway.url)
        await one.open({})
        await other.open({})
        await one.post("tools/list", {})
        args = {"name": "slow_compute", "arguments": {"seconds": 600}, "task": {}}
        created = (await one.post("tools/call", args))["result"]["task"]
        assert (await other.post("tasks/get", {"taskId": created["taskId"]}))["error"]["code"] == -32602
        assert (await other.post("tasks/list", {}))["result"]["tasks"] == []
        assert gateway.gateway.relays.callers
        cancelled = (await one.post("tasks/cancel", {"taskId": created["taskId"]}))["result"]
        assert cancelled["status"] == "cancelled"
        with trio.fail_after(BOUND):
            while gateway.gateway.relays.callers:  # noqa: ASYNC110  (the runtime call ends: polled)
                await trio.sleep(0.02)


def marked_server() -> MCPServer[Any]:
    """A server whose tool ``never`` forbids tasks in its listing, ``always`` requires one, ``plain`` says nothing."""
    server: MCPServer[Any] = MCPServer("marked")

    @server.tool(structured_output=False)
    def never() -> str:
        return "never ran"

    @server.tool(structured_output=False)
    def always() -> str:
        return "always ran"

    @server.tool(structured_output=False)
    def plain() -> str:
        return "plain ran"

    listed = server.list_tools
    marks = {
        "never": types.ToolExecution(task_support="forbidden"),
        "always": types.ToolExecution(task_support="required"),
    }

    async def list_tools() -> list[types.Tool]:
        return [t.model_copy(update={"execution": marks[t.name]}) if t.name in marks else t for t in await listed()]

    server.list_tools = list_tools  # type: ignore[method-assign]
    return server


async def test_2025_a_tool_that_forbids_tasks_refuses_a_task_augmented_call(tmp_path: Path) -> None:
    async with (
        fixture_gateway(tmp_path, marked_server, "legacy") as gateway,
        httpx2.AsyncClient(timeout=BOUND) as http,
    ):
        s = Session(http, gateway.url)
        await s.open({})
        listed = {tool["name"]: tool["execution"] for tool in (await s.post("tools/list", {}))["result"]["tools"]}
        assert listed == {
            "never": {"taskSupport": "forbidden"},
            "always": {"taskSupport": "required"},
            "plain": {"taskSupport": "optional"},
        }, listed
        refused = await s.post("tools/call", {"name": "never", "arguments": {}, "task": {}})
        assert refused["error"]["code"] == -32601
        plainly = (await s.post("tools/call", {"name": "never", "arguments": {}}))["result"]
        assert plainly["content"][0]["text"] == "never ran"
        created = (await s.post("tools/call", {"name": "plain", "arguments": {}, "task": {}}))["result"]["task"]
        result = (await s.post("tasks/result", {"taskId": created["taskId"]}))["result"]
        assert result["content"][0]["text"] == "plain ran"


async def test_2025_the_end_of_a_task_is_pushed_on_the_sessions_stream(tmp_path: Path) -> None:
    async with session(tmp_path, {}) as (s, _init):
        pushed: list[dict[str, Any]] = []
        ended = trio.Event()
        listening = trio.Event()

        async def listen() -> None:
            headers = {**s.headers, "accept": "text/event-stream"}
            async with s.http.stream("GET", s.url, headers=headers) as stream:
                listening.set()
                async for line in stream.aiter_lines():
                    if line.startswith("data:"):
                        message = json.loads(line[5:])
                        if message.get("method") == "notifications/tasks/status":
                            pushed.append(message["params"])
                            ended.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(listen)
            with trio.fail_after(BOUND):
                await listening.wait()
                args = {"name": "slow_compute", "arguments": {"seconds": 0.2}, "task": {}}
                created = (await s.post("tools/call", args))["result"]["task"]
                await ended.wait()
            nursery.cancel_scope.cancel()
        assert [(p["taskId"], p["status"]) for p in pushed] == [(created["taskId"], "completed")]


async def test_2025_an_ended_task_is_forgotten_after_its_ttl(tmp_path: Path) -> None:
    async with session(tmp_path, {}) as (s, _init):
        args = {"name": "slow_compute", "arguments": {"seconds": 0}, "task": {"ttl": 200}}
        first = (await s.post("tools/call", args))["result"]["task"]
        assert first["ttl"] == 200
        await s.post("tasks/result", {"taskId": first["taskId"]})
        assert (await s.post("tasks/get", {"taskId": first["taskId"]}))["result"]["status"] == "completed"
        await trio.sleep(0.5)
        await s.post("tools/call", {**args, "task": {}})  # a new task sweeps the expired ones
        assert (await s.post("tasks/get", {"taskId": first["taskId"]}))["error"]["code"] == -32602
