"""The gateway's API keys: stored as digests, shown once, each opening one profile or all.

The SDK's own client reaches the gateway with a key in its HTTP client's headers; a missing,
unknown or expired key is 401 with ``WWW-Authenticate: Bearer``, a key of another profile 403.
The key file follows the token file's rules (0600, atomic, locked), and a serving gateway sees
keys added and removed by another process. Keys never reach a log, a repr or an error.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
from authkit import BOUND, auth_gateway, post_raw, sdk_session

from mcp_actors.errors import ConfigError
from mcp_actors.serve import (
    FileApiKeyTable,
    GatewayAuth,
    MemoryApiKeyTable,
    create_api_key,
)
from mcp_actors.serve._auth_keys import KEY_PREFIX, key_digest


async def test_a_key_is_random_shown_once_and_stored_as_its_digest(tmp_path: Path) -> None:
    """The file holds the SHA-256 of the key, never the key; mode 0600; the entry's repr hides the digest."""
    table = FileApiKeyTable(tmp_path / "state" / "gateway-keys.json")
    key, entry = await create_api_key(table, "ci", profile="github")
    other, _ = await create_api_key(table, "laptop")
    assert key.startswith(KEY_PREFIX) and len(key) >= len(KEY_PREFIX) + 43 and key != other
    text = table.path.read_text()
    assert key not in text and other not in text
    assert key_digest(key) in text
    assert stat.S_IMODE(os.stat(table.path).st_mode) == 0o600
    assert entry.digest not in repr(entry) and key not in repr(entry)
    assert [(k.name, k.profile) for k in await table.list()] == [("ci", "github"), ("laptop", None)]
    assert (await table.lookup(key_digest(key))) == entry
    assert await table.lookup(key_digest(KEY_PREFIX + "x" * 43)) is None


@pytest.mark.parametrize("kind", ["file", "memory"])
async def test_names_are_unique_and_removal_is_by_name(tmp_path: Path, kind: str) -> None:
    """A second key of one name is refused naming the fix; rm deletes it and reports whether there was one."""
    table = FileApiKeyTable(tmp_path / "keys.json") if kind == "file" else MemoryApiKeyTable()
    key, _ = await create_api_key(table, "ci")
    with pytest.raises(ConfigError, match="exists already; remove it first"):
        await create_api_key(table, "ci")
    with pytest.raises(ValueError, match="key name"):
        await create_api_key(table, "../etc")
    assert await table.remove("ci") is True
    assert await table.remove("ci") is False
    assert await table.lookup(key_digest(key)) is None
    assert await table.list() == []


async def test_the_sdk_client_with_a_key_is_served_and_without_one_refused(tmp_path: Path) -> None:
    """A valid key: the SDK client lists and calls tools; none, unknown or expired: 401 with a Bearer challenge."""
    table = MemoryApiKeyTable()
    key, _ = await create_api_key(table, "ci")
    expired, _ = await create_api_key(table, "old", expires_at=time.time() - 1)
    async with auth_gateway(tmp_path, GatewayAuth(api_keys=table)) as gateway:
        async with sdk_session(gateway.url, token=key) as session:
            with trio.fail_after(BOUND):
                tools = {tool.name for tool in (await session.list_tools()).tools}
                assert "demo__echo" in tools
                result = await session.call_tool("demo__echo", {"text": "with a key"})
                assert "with a key" in str(result.content)
        for token, error in [(None, None), (KEY_PREFIX + "A" * 43, "invalid_token"), (expired, "invalid_token")]:
            response = await post_raw(gateway.url, token=token)
            assert response.status_code == 401
            challenge = response.headers["www-authenticate"]
            assert challenge.startswith("Bearer ")
            if error is None:
                assert "error=" not in challenge  # RFC 6750 §3.1: no error code when no credentials were sent
            else:
                assert f'error="{error}"' in challenge
        assert "expired" in (await post_raw(gateway.url, token=expired)).json()["error_description"]
        response = await post_raw(gateway.url, headers={"authorization": f"Basic {key}"})
        assert response.status_code == 401 and "error=" not in response.headers["www-authenticate"]
        # Every era and method passes the same check: a 2026-07-28 request, a GET stream, a DELETE.
        modern = await post_raw(gateway.url, headers={"mcp-protocol-version": "2026-07-28"})
        assert modern.status_code == 401
        async with httpx2.AsyncClient(timeout=BOUND) as http:
            stream = await http.get(gateway.url, headers={"accept": "text/event-stream", "mcp-session-id": "x"})
            ended = await http.delete(gateway.url, headers={"mcp-session-id": "x"})
            assert (stream.status_code, ended.status_code) == (401, 401)
            known = await http.delete(gateway.url, headers={"mcp-session-id": "x", "authorization": f"Bearer {key}"})
            assert known.status_code == 404  # admitted; the session is unknown
        raw = await connect_raw(gateway.url)
        twice = f"authorization: Bearer {key}\r\nauthorization: Bearer {key}\r\n"
        status, head = await raw(f"DELETE /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n{twice}\r\n")
        assert status == 400 and 'error="invalid_request"' in head


async def test_a_key_opens_its_own_profile_only(tmp_path: Path) -> None:
    """A profile's key: 403 on another profile and on /mcp; no profile: every path; `default`: /mcp too."""
    table = MemoryApiKeyTable()
    github, _ = await create_api_key(table, "gh", profile="github")
    everything, _ = await create_api_key(table, "all")
    default, _ = await create_api_key(table, "plain", profile="default")
    async with auth_gateway(tmp_path, GatewayAuth(api_keys=table)) as gateway:
        response = await post_raw(gateway.url + "/slack", token=github)
        assert response.status_code == 403
        assert 'error="insufficient_scope"' in response.headers["www-authenticate"]
        assert "'github'" in response.json()["error_description"]
        assert (await post_raw(gateway.url, token=github)).status_code == 403
        assert (await post_raw(gateway.url + "/github", token=github)).status_code == 200
        for path in ("", "/github", "/slack"):
            assert (await post_raw(gateway.url + path, token=everything)).status_code == 200, path
        assert (await post_raw(gateway.url, token=default)).status_code == 200
        assert (await post_raw(gateway.url + "/default", token=default)).status_code == 200
        assert (await post_raw(gateway.url + "/github", token=default)).status_code == 403
        # An unknown profile: the credentials are checked first, so no profile list leaks to a stranger.
        assert (await post_raw(gateway.url + "/nope")).status_code == 401
        assert (await post_raw(gateway.url + "/nope", token=everything)).status_code == 404
        async with sdk_session(gateway.url + "/slack", token=everything) as session:
            with trio.fail_after(BOUND):
                assert {tool.name for tool in (await session.list_tools()).tools} == {"demo__echo"}


async def connect_raw(url: str) -> Any:
    """A function that writes one raw request to the gateway and returns (status, head) of the answer."""
    port = int(url.rsplit(":", 1)[1].split("/")[0])

    async def send(request: str) -> tuple[int, str]:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(request.encode())
            data = b""
            with trio.fail_after(BOUND):
                while b"\r\n\r\n" not in data:
                    chunk = await stream.receive_some(65536)
                    assert chunk, "the gateway closed the connection without an answer"
                    data += chunk
        head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").lower()
        return int(head.split()[1]), head

    return send


async def _status_within(url: str, key: str, status: int) -> bool:
    """Whether a request with ``key`` is answered ``status`` within :data:`BOUND` seconds (asked every 0.2 s)."""
    with trio.move_on_after(BOUND):
        for _ in range(int(BOUND / 0.2)):
            if (await post_raw(url, token=key)).status_code == status:
                return True
            await trio.sleep(0.2)
    return False


async def test_a_gateway_sees_keys_added_and_removed_by_another_process(tmp_path: Path) -> None:
    """The file table re-reads a changed file: a key removed by `keys rm` stops working within seconds."""
    path = tmp_path / "gateway-keys.json"
    serving = FileApiKeyTable(path)
    async with auth_gateway(tmp_path, GatewayAuth(api_keys=serving)) as gateway:
        assert (await post_raw(gateway.url, token=KEY_PREFIX + "B" * 43)).status_code == 401
        key, _ = await create_api_key(FileApiKeyTable(path), "late")  # another table: another process's view
        assert await _status_within(gateway.url, key, 200)
        assert await FileApiKeyTable(path).remove("late")
        assert await _status_within(gateway.url, key, 401)


async def test_keys_never_reach_the_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Admitted and refused requests log no key, nor its digest."""
    table = MemoryApiKeyTable()
    key, entry = await create_api_key(table, "ci", profile="github")
    wrong = KEY_PREFIX + "C" * 43
    caplog.set_level(logging.DEBUG)
    async with auth_gateway(tmp_path, GatewayAuth(api_keys=table)) as gateway:
        await post_raw(gateway.url + "/github", token=key)
        await post_raw(gateway.url, token=key)
        await post_raw(gateway.url, token=wrong)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "refused a request" in logged  # the refusals were logged, with their reasons
    for secret in (key, wrong, entry.digest, key_digest(wrong)):
        assert secret not in logged
