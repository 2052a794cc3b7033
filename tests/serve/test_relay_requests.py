"""An upstream's requests to the client (sampling, elicitation, roots) reach the client whose call caused them.

Through the gateway, with the SDK's own client and its host callbacks, at 2025-11-25 (the
request travels on the call's event stream, the answer comes back as a POST) and 2026-07-28
(the call's answer is an ``InputRequiredResult``, the client's retry carries the answers),
against an upstream spoken to at either revision (a 2025-style request, or an input-required
answer the runtime fulfils through the gateway).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
import trio
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError

from mcp_actors.serve._client_requests import Caller, ClientRequests
from tests.serve.relay_rig import BOUND, demo_gateway, sdk_client, text_of

CLIENTS = ("2025-11-25", "2026-07-28")
UPSTREAMS = ("legacy", "auto")


def callbacks(name: str, seen: list[str]) -> dict[str, Any]:
    """A host's three callbacks, answering as ``name`` and noting each request they get."""

    async def sampling(
        ctx: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        seen.append("sampling")
        prompt = params.messages[0].content
        asked = prompt.text if isinstance(prompt, types.TextContent) else "?"
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text=f"{name} read {asked!r}"), model="test-model"
        )

    async def elicitation(ctx: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append("elicitation")
        return types.ElicitResult(action="accept", content={"name": name})

    async def list_roots(ctx: ClientRequestContext) -> types.ListRootsResult:
        seen.append("roots")
        return types.ListRootsResult(roots=[types.Root(uri=f"file:///home/{name}", name=name)])  # type: ignore[arg-type]

    return {"sampling_callback": sampling, "elicitation_callback": elicitation, "list_roots_callback": list_roots}


@pytest.mark.parametrize("upstream", UPSTREAMS)
@pytest.mark.parametrize("version", CLIENTS)
async def test_sampling_elicitation_and_roots_reach_the_calling_client(
    tmp_path: Path, version: str, upstream: str
) -> None:
    """Each request of the upstream is answered by the client's own callback; its answer reaches the tool."""
    seen: list[str] = []
    async with demo_gateway(tmp_path, upstream) as (_, gateway):
        async with sdk_client(gateway.url, version, **callbacks("ada", seen)) as client:
            with trio.fail_after(BOUND):
                sampled = await client.call_tool("demo__ask_model", {"prompt": "hi"})
                assert not sampled.is_error, text_of(sampled)
                assert "ada read 'hi'" in text_of(sampled)
                form = await client.call_tool("demo__ask_user", {})
                assert not form.is_error, text_of(form)
                answer = json.loads(text_of(form))
                assert answer["action"] == "accept"
                assert answer["content"]["name"] == "ada"
                assert answer["content"]["age"] == 30  # the schema's default, filled in on the way
                roots = await client.call_tool("demo__list_host_roots", {})
                assert json.loads(text_of(roots)) == [{"uri": "file:///home/ada", "name": "ada"}]
    assert seen == ["sampling", "elicitation", "roots"]


@pytest.mark.parametrize("upstream", UPSTREAMS)
@pytest.mark.parametrize("version", CLIENTS)
async def test_a_client_without_the_capability_is_never_asked(tmp_path: Path, version: str, upstream: str) -> None:
    """A client that declared no sampling gets a failed call naming the capability, and no request."""
    async with demo_gateway(tmp_path, upstream) as (_, gateway):
        async with sdk_client(gateway.url, version) as client:
            with trio.fail_after(BOUND):
                try:
                    result = await client.call_tool("demo__ask_model", {"prompt": "hi"})
                except MCPError as exc:  # the server refused at once (-32021 at 2026-07-28)
                    assert "sampling" in exc.error.message
                else:
                    assert result.is_error
                    assert "sampling" in text_of(result)


async def test_two_clients_asked_at_once_each_answer_their_own_call(tmp_path: Path) -> None:
    """Concurrent calls of two clients: each elicitation reaches the client whose call caused it."""
    async with demo_gateway(tmp_path, "auto") as (_, gateway):
        results: dict[str, Any] = {}
        both_asked = trio.Event()
        asked: list[str] = []

        async def one(name: str, version: str) -> None:
            seen: list[str] = []
            handlers = callbacks(name, seen)
            inner = handlers["elicitation_callback"]

            async def elicitation(ctx: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
                asked.append(name)
                if len(asked) == 2:
                    both_asked.set()
                await both_asked.wait()  # both calls are waiting on their client at once
                result: types.ElicitResult = await inner(ctx, params)
                return result

            handlers["elicitation_callback"] = elicitation
            async with sdk_client(gateway.url, version, **handlers) as client:
                results[name] = json.loads(text_of(await client.call_tool("demo__ask_user", {})))

        with trio.fail_after(BOUND):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(one, "ada", "2025-11-25")
                nursery.start_soon(one, "bob", "2026-07-28")
        assert results["ada"]["content"]["name"] == "ada"
        assert results["bob"]["content"]["name"] == "bob"


async def test_a_request_outside_any_call_is_refused_upstream() -> None:
    """No client call to the server runs: the upstream gets a JSON-RPC error saying so, naming the server."""
    relays = ClientRequests(server_names=lambda server_id: "demo")
    params = types.CreateMessageRequestParams(
        messages=[types.SamplingMessage(role="user", content=types.TextContent(text="hi"))], max_tokens=10
    )
    with pytest.raises(MCPError) as refused:
        await relays._sampling("s1", params)
    assert "no client call" in refused.value.error.message and "'demo'" in refused.value.error.message
    # Calls of two clients to the server, and a request that does not say which one: refused too.
    relays.callers["s1"] = [
        Caller("s1", client=object(), capabilities={"sampling": {}}),
        Caller("s1", client=object(), capabilities={"sampling": {}}),
    ]
    with pytest.raises(MCPError) as ambiguous:
        await relays._sampling("s1", params)
    assert "several clients" in ambiguous.value.error.message


async def test_a_retry_naming_no_parked_call_is_refused_clearly(tmp_path: Path) -> None:
    """A 2026-07-28 retry whose ``requestState`` names no call waiting at the gateway: -32602, saying what to do."""
    async with demo_gateway(tmp_path, "auto") as (_, gateway):
        async with sdk_client(gateway.url, "2026-07-28") as client:
            with trio.fail_after(BOUND), pytest.raises(MCPError) as refused:
                await client.session.call_tool(
                    "demo__ask_model", {"prompt": "hi"}, request_state="forged", allow_input_required=True
                )
    assert refused.value.error.code == types.INVALID_PARAMS
    assert "requestState" in refused.value.error.message and "without it" in refused.value.error.message


async def test_a_parked_call_nobody_retries_is_cancelled_upstream(autojump_clock: trio.abc.Clock) -> None:
    """An ``InputRequiredResult`` handed out and never retried: after PARK_TIMEOUT its upstream call ends."""
    from mcp_actors.serve._client_requests import PARK_TIMEOUT

    relays = ClientRequests()
    ended = trio.Event()

    async def op() -> Any:
        try:
            return await relays._relay("s1", "elicitation/create", {"message": "go on?", "requestedSchema": {}})
        finally:
            ended.set()

    async with trio.open_nursery() as nursery:
        await nursery.start(relays.run, None)
        caller = Caller("s1", client=object(), capabilities={"elicitation": {}})
        answer = await relays.run_parked(caller, {}, op)
        assert answer["resultType"] == "input_required"
        assert [request["method"] for request in answer["inputRequests"].values()] == ["elicitation/create"]
        assert answer["requestState"] in relays.parked
        await trio.sleep(PARK_TIMEOUT - 1)
        assert not ended.is_set()
        await trio.sleep(2)
        assert ended.is_set() and not relays.parked
        nursery.cancel_scope.cancel()
