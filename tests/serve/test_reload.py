"""Hot reload: a running gateway follows its config file, and its clients keep their sessions.

Another writer is another :class:`ConfigStore` on the same file (what ``mcp-actors add`` or
``mcp-actors profile`` in another shell uses: the same cross-process lock), or a plain
``os.replace`` of the file (an editor's save). The gateway looks at the file every 50 ms here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_actors import events
from mcp_actors._config.profiles import PROFILES_KEY
from mcp_actors._config.record import McpServerRecord, ServerConfig, ServerType
from mcp_actors._config.store import ConfigStore, SectionChange
from mcp_actors.testing import demo_server_command
from tests.serve.test_profiles import BOUND, CODER, _text, profiled_gateway

FAST = 0.05
"""Seconds between the gateway's looks at the file, in these tests."""


def other_writer(rig: Any) -> ConfigStore:
    """A second store on the gateway's config file: another process, as far as the file knows."""
    return ConfigStore(rig.runtime.service.config_store.path)


async def set_profiles(store: ConfigStore, profiles: Any) -> None:
    await trio.to_thread.run_sync(
        lambda: store.modify_section(PROFILES_KEY, lambda _current: SectionChange(value=profiles))
    )


async def next_event(subscription: Any) -> Any:
    return await subscription.receive()


async def test_a_profile_changed_elsewhere_applies_without_dropping_sessions(tmp_path: Path) -> None:
    """Another writer adds a tool to the profile: a listener hears list_changed, an open session lists it."""
    async with profiled_gateway(tmp_path, CODER, reload_interval=FAST) as rig:
        with trio.fail_after(BOUND):
            async with Client(rig.url("coder"), mode="legacy") as session, Client(rig.url("coder")) as modern:
                before = {tool.name for tool in (await session.list_tools()).tools}
                assert "beta__echo" not in before
                async with modern.listen(tools_list_changed=True) as subscription:
                    changed = {**CODER["coder"], "servers": {**CODER["coder"]["servers"], "beta": {}}}
                    await set_profiles(other_writer(rig), {"coder": changed})
                    # A notice may also come from a server that finished starting meanwhile: each
                    # one is a cue to list again, until the session sees the change (bounded above).
                    async for _event in subscription:
                        after = {tool.name for tool in (await session.list_tools()).tools}  # the same session
                        if "beta__echo" in after:
                            break
                assert {"beta__echo", "beta__weather", "say"} <= after
                assert _text(await session.call_tool("beta__echo", {"text": "new"})) == "new"


async def test_a_profile_added_is_served_and_a_removed_one_refused(tmp_path: Path) -> None:
    """A profile another writer adds is served; once removed, its open session is told which profiles there are."""
    async with profiled_gateway(tmp_path, CODER, reload_interval=FAST) as rig:
        writer = other_writer(rig)
        with trio.fail_after(BOUND), rig.runtime.service.subscribe(types=[events.PROFILES_CHANGED]) as changes:
            await set_profiles(writer, {**CODER, "ops": {"servers": {"beta": {"tools": ["echo"]}}}})
            assert (await next_event(changes)).data["profiles"] == ["ops"]
            async with Client(rig.url("ops"), mode="legacy") as ops:
                assert [tool.name for tool in (await ops.list_tools()).tools] == ["beta__echo"]
                await set_profiles(writer, CODER)
                assert (await next_event(changes)).data["profiles"] == ["ops"]
                with pytest.raises(
                    MCPError, match=r"no profile 'ops' is configured \(the profiles are: default, coder\)"
                ):
                    await ops.list_tools()
            async with httpx2.AsyncClient() as http:
                ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
                headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
                refused = await http.post(rig.url("ops"), headers=headers, json=ping)
                assert refused.status_code == 404
                assert "no profile 'ops' is configured" in refused.text


async def test_a_server_added_elsewhere_is_served_without_a_restart(tmp_path: Path) -> None:
    """A server record another writer appends is started by the runtime and listed at /mcp."""
    async with profiled_gateway(tmp_path, CODER, reload_interval=FAST) as rig, Client(rig.url()) as client:
        with trio.fail_after(BOUND):
            assert not any(tool.name.startswith("gamma__") for tool in (await client.list_tools()).tools)
            argv = demo_server_command()
            record = McpServerRecord(
                name="gamma", type=ServerType.STDIO, config=ServerConfig(command=argv[0], args=tuple(argv[1:]))
            )
            async with client.listen(tools_list_changed=True) as subscription:
                await trio.to_thread.run_sync(lambda: other_writer(rig).modify(lambda records: records.append(record)))
                async for _event in subscription:
                    names = {tool.name for tool in (await client.list_tools()).tools}
                    if "gamma__echo" in names:
                        break
            assert _text(await client.call_tool("gamma__echo", {"text": "g"})) == "g"


async def test_a_bad_edit_keeps_the_running_state_and_says_why(tmp_path: Path) -> None:
    """Bad JSON, then a bad profile: each reported (naming the field), the old profile served; a fix applies."""
    async with profiled_gateway(tmp_path, CODER, reload_interval=FAST) as rig:
        path = rig.runtime.service.config_store.path
        good = path.read_bytes()
        wanted = [events.PROFILES_CHANGED, events.CONFIG_INVALID]
        with trio.fail_after(BOUND), rig.runtime.service.subscribe(types=wanted) as seen:
            async with Client(rig.url("coder"), mode="legacy") as session:
                broken = tmp_path / "broken.json"
                broken.write_bytes(good[: len(good) // 2])  # an editor's half-saved file
                os.replace(broken, path)
                event = await next_event(seen)
                assert event.type == events.CONFIG_INVALID
                assert "is not valid JSON" in event.data["error"]
                assert _text(await session.call_tool("say", {"text": "still"})) == "still"

                await set_profiles_raw(path, good, {"coder": {"naming": "camel", "servers": {}}})
                event = await next_event(seen)
                assert event.type == events.CONFIG_INVALID
                assert event.data["profile"] == "coder"
                assert event.data["field"] == "profiles.coder.naming"
                assert _text(await session.call_tool("say", {"text": "kept"})) == "kept"

                await set_profiles_raw(path, good, {"coder": {"servers": {"beta": {"tools": ["echo"]}}}})
                event = await next_event(seen)
                assert event.type == events.PROFILES_CHANGED
                assert [tool.name for tool in (await session.list_tools()).tools] == ["beta__echo"]
                with pytest.raises(MCPError, match="Unknown tool: say"):
                    await session.call_tool("say", {"text": "gone"})
            assert seen.dropped == 0


async def set_profiles_raw(path: Path, good: bytes, profiles: Any) -> None:
    """Replace the file with the good version's records and ``profiles``, as an editor saves it."""
    import json

    document = json.loads(good)
    document[PROFILES_KEY] = profiles
    staged = path.with_name("staged.json")
    staged.write_text(json.dumps(document))
    os.replace(staged, path)


class _SavedRightAfterABadRead(ConfigStore):
    """A store whose file another writer replaces just after a read of it fails (once).

    The window is a thread switch wide in real life (the editor saves the fix while the
    watcher reports the broken version); here it is made certain, to pin the interleaving.
    """

    def __init__(self, path: Path, fixed: bytes) -> None:
        super().__init__(path)
        self._fixed: bytes | None = fixed

    def load_section(self, key: str) -> Any:
        try:
            return super().load_section(key)
        except Exception:
            if self._fixed is not None:
                staged = self.path.with_name("fixed.json")
                staged.write_bytes(self._fixed)
                os.replace(staged, self.path)
                self._fixed = None
            raise


async def test_a_version_saved_while_a_bad_one_is_reported_is_still_applied(tmp_path: Path) -> None:
    """The watcher remembers the version it read, not the one on disk when it reports: a fix saved meanwhile applies."""
    from mcp_actors.serve._reload import watch_config

    async with profiled_gateway(tmp_path, CODER, reload_interval=None) as rig:  # this test's watcher only
        path = rig.runtime.service.config_store.path
        good = path.read_bytes()
        document = json.loads(good)
        document[PROFILES_KEY] = {"coder": {"servers": {"beta": {"tools": ["echo"]}}}}
        store = _SavedRightAfterABadRead(path, json.dumps(document).encode())
        seen = store.fingerprint()
        wanted = [events.PROFILES_CHANGED, events.CONFIG_INVALID]
        with trio.fail_after(BOUND), rig.runtime.service.subscribe(types=wanted) as changes:
            async with trio.open_nursery() as nursery:
                gateway = rig.gateway.gateway
                await nursery.start(lambda **ts: watch_config(gateway, store, interval=FAST, seen=seen, **ts))
                broken = tmp_path / "broken.json"
                broken.write_bytes(good[: len(good) // 2])
                os.replace(broken, path)
                assert (await next_event(changes)).type == events.CONFIG_INVALID
                applied = await next_event(changes)
                assert applied.type == events.PROFILES_CHANGED, applied.data
                assert applied.data["profiles"] == ["coder"]
                nursery.cancel_scope.cancel()
