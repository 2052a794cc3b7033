"""No token and no client secret ever appears in a log line, an event, a repr, an error or --json output."""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_actors._auth.oauth import AuthSettings, build_auth, oauth_target_for, open_authorized_session
from mcp_actors.auth import MemoryTokenStore, OAuthConfig
from mcp_actors.errors import AuthorizationRequired, ConnectionFailed
from mcp_actors.events import Event
from mcp_actors.runtime import open_runtime
from tests.auth.conftest import browser, fail_after, oauth_server

_SECRET = "client-secret-that-must-not-leak"


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info:
            text += "".join(traceback.format_exception(*record.exc_info))
        self.lines.append(text)


@pytest.fixture
def logs() -> Iterator[_Collect]:
    """Every log record of every logger, at DEBUG."""
    handler = _Collect()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


async def test_no_token_or_secret_in_logs_events_reprs_or_errors(logs: _Collect, tmp_path: Path) -> None:
    """A full login, calls, a refresh, a revocation and its error: the tokens and the secret show up nowhere."""
    async with oauth_server(clients={"app": {"secret": _SECRET}}) as server:
        store = MemoryTokenStore()
        seen: list[Event] = []
        texts: list[str] = []
        with fail_after():
            async with open_runtime(
                tmp_path / "cfg.json",
                sweep_ledger=False,
                connect_on_add=False,
                authorization_handler=browser,
                token_store=store,
            ) as rt:
                events = rt.service.subscribe()
                record = await rt.service.add(
                    {
                        "name": "guarded",
                        "type": "http",
                        "config": {"url": server.url, "oauth": {"clientId": "app", "clientSecret": _SECRET}},
                    }
                )
                await rt.service.call_tool("guarded", "echo", {"text": "one"})
                entry = await store.load(record.id)
                assert entry is not None
                first = dict(entry["tokens"])
                await server.control(expireAccess=True)
                await rt.service.call_tool("guarded", "echo", {"text": "two"})  # refreshed on the 401
                entry = await store.load(record.id)
                assert entry is not None
                second = dict(entry["tokens"])
                await server.control(revoke=True, deny=True)
                with pytest.raises(ConnectionFailed) as caught:
                    await rt.service.call_tool("guarded", "echo", {"text": "three"})
                texts += [str(caught.value), repr(caught.value)]
                texts += [repr(record), repr(rt.service.get("guarded")), repr(rt.service.status("guarded"))]
                target = oauth_target_for(record)
                assert target is not None
                texts += [repr(target), repr(build_auth(target)), repr(store)]
                while True:
                    try:
                        seen.append(events.receive_nowait())
                    except Exception:
                        break
        texts += [json.dumps(event.data, default=str) for event in seen]
        texts += logs.lines
        assert seen and logs.lines
        secrets = [_SECRET]
        for tokens in (first, second):
            secrets += [tokens["access_token"], tokens["refresh_token"]]
        for text in texts:
            for secret in secrets:
                assert secret not in text, text


def test_oauth_config_repr_hides_the_client_secret() -> None:
    """The record's OAuth settings show the client secret as '***'."""
    config = OAuthConfig(client_id="app", client_secret=_SECRET)
    assert _SECRET not in repr(config) and "'***'" in repr(config)


async def test_an_expected_authorization_failure_logs_no_error_traceback(logs: _Collect) -> None:
    """A login nobody can give is reported to the caller, typed; the SDK's ERROR traceback is not logged."""
    async with oauth_server() as server:
        target = server.target()
        auth = build_auth(target, AuthSettings(token_store=MemoryTokenStore()))
        with fail_after(), pytest.raises(AuthorizationRequired):
            async with open_authorized_session(target, auth):
                pass
    assert not [line for line in logs.lines if "OAuth flow error" in line]
