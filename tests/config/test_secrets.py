"""Secrets beyond env and header values: URLs, stderr echoes, reprs and the SDK's log lines."""

from __future__ import annotations

import logging
import sys

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from mcp_actors import events
from mcp_actors._config.redact import MIN_SECRET_LENGTH, SecretFilter, redact_text, redact_url, registered_secrets
from mcp_actors._connection.handle import open_connection
from mcp_actors._connection.status import ConnectionSettings, ConnectionState
from mcp_actors._wire.transports import HttpParams, StdioParams
from mcp_actors.errors import ConnectionFailed
from mcp_actors.testing import demo_server_command, serve_http
from supervisors import Intensity

PASSWORD = "pa55word-in-url"
QUERY_KEY = "k3y-in-query-string"
ENV_SECRET = "s3cr3t-env-value-42"
HEADER_TOKEN = "tok-header-abcdef"

SECRET_URL = f"http://alice:{PASSWORD}@127.0.0.1:9/mcp?api_key={QUERY_KEY}"


def assert_clean(*texts: str) -> None:
    for text in texts:
        for secret in (PASSWORD, QUERY_KEY, ENV_SECRET, HEADER_TOKEN):
            assert secret not in text, f"{secret!r} leaked into {text!r}"


def settings(transport: HttpParams | StdioParams, **overrides: object) -> ConnectionSettings:
    return ConnectionSettings(
        server_id="id-secret",
        server_name="secretive",
        transport=transport,
        connect_timeout=20.0,
        ping_interval=0,
        intensity=Intensity(max_restarts=0, period=60),
        **overrides,  # type: ignore[arg-type]
    )


def test_url_credentials_stay_out_of_reprs() -> None:
    """User info and query values of a URL appear in neither HttpParams' nor ConnectionSettings' repr."""
    params = HttpParams(url=SECRET_URL, headers={"Authorization": f"Bearer {HEADER_TOKEN}"})
    assert_clean(repr(params), repr(settings(params)), str(settings(params)))
    assert "127.0.0.1:9/mcp" in repr(params), "the host and path stay, to recognise the server"


async def test_url_credentials_stay_out_of_the_connect_error(caplog: pytest.LogCaptureFixture) -> None:
    """A URL with credentials that cannot be reached gives an error and log lines without them."""
    caplog.set_level(logging.DEBUG)
    transport = HttpParams(url=SECRET_URL, headers={"X-Api-Key": HEADER_TOKEN}, connect_timeout=10.0)
    handle, start = open_connection(settings(transport), events.EventBus())
    async with trio.open_nursery() as nursery:
        await nursery.start(start)
        try:
            with trio.fail_after(30), pytest.raises(ConnectionFailed) as info:
                await handle.connect()
            status = handle.status()
        finally:
            await handle.aclose()
    assert "127.0.0.1:9" in str(info.value)
    assert_clean(str(info.value), status.error or "", *(record.getMessage() for record in caplog.records))


async def test_the_sdk_debug_line_with_the_url_is_redacted(caplog: pytest.LogCaptureFixture) -> None:
    """The HTTP client's request lines (with the URL) and every other log line carry no URL credentials."""
    caplog.set_level(logging.DEBUG)
    async with serve_http(demo_server_command("--transport", "streamable-http", "--port", "0")) as server:
        scheme, rest = server.url.split("://", 1)
        url = f"{scheme}://alice:{PASSWORD}@{rest}?token={QUERY_KEY}"
        transport = HttpParams(url=url, headers={"Authorization": f"Bearer {HEADER_TOKEN}"}, connect_timeout=20.0)
        handle, start = open_connection(settings(transport), events.EventBus())
        async with trio.open_nursery() as nursery:
            await nursery.start(start)
            try:
                with trio.fail_after(30):
                    tools = await handle.list_tools()
                assert "echo" in {tool.name for tool in tools}
            finally:
                await handle.aclose()
    messages = [record.getMessage() for record in caplog.records]
    # Streamable HTTP runs on our own wire: httpx's INFO line per request is the one that names the URL.
    assert any("HTTP Request: POST" in message for message in messages), "the request line was logged"
    assert_clean(*messages)


async def test_a_server_echoing_its_env_secret_to_stderr_does_not_leak_it(caplog: pytest.LogCaptureFixture) -> None:
    """A stdio server printing its own env secret: error, status tail and logs show *** in its place."""
    caplog.set_level(logging.DEBUG)
    script = (
        "import os, sys\n"
        "sys.stderr.write('auth failed for key ' + os.environ['MY_API_KEY'] + '\\n')\n"
        "sys.stderr.write('retry with OPENAI_API_KEY=sk-live-0123456789 later\\n')\n"
        "sys.exit(3)\n"
    )
    transport = StdioParams(command=sys.executable, args=("-c", script), env={"MY_API_KEY": ENV_SECRET})
    bus = events.EventBus()
    sub = bus.subscribe()
    handle, start = open_connection(settings(transport), bus)
    async with trio.open_nursery() as nursery:
        await nursery.start(start)
        try:
            with trio.fail_after(30), pytest.raises(ConnectionFailed) as info:
                await handle.connect()
            status = handle.status()
        finally:
            await handle.aclose()
    assert status.state is ConnectionState.ERROR
    tail = info.value.stderr_tail
    assert "auth failed for key ***" in tail, tail
    assert "retry with OPENAI_API_KEY=*** later" in tail, tail
    event_texts = []
    while True:
        try:
            event_texts.append(repr(sub.receive_nowait().data))
        except trio.WouldBlock:
            break
    assert_clean(str(info.value), *tail, *status.stderr_tail, status.error or "", *event_texts)
    assert_clean(*(record.getMessage() for record in caplog.records))
    assert "sk-live-0123456789" not in str(info.value) + "".join(tail)


def test_redact_url_hides_user_info_and_query() -> None:
    """redact_url keeps scheme, host, port and path; user info and query become ***; the fragment goes."""
    assert redact_url(SECRET_URL + "#frag") == "http://***@127.0.0.1:9/mcp?***"
    assert redact_url("https://example.test/mcp") == "https://example.test/mcp"
    assert redact_url("http://[::1") == "<unparsable url>"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abcdef123456", "Authorization: *** ***"),
        ('{"password": "hunter22", "user": "bob"}', '{"password": "***", "user": "bob"}'),
        ("api_key=abc123&page=2", "api_key=***&page=2"),
        ("X-Api-Key: zzz", "X-Api-Key: ***"),
        ("HTTP 401 Unauthorized: authorization is needed", "HTTP 401 Unauthorized: authorization is needed"),
        ("see http://u:p@h.test/x?token=1 now", "see http://***@h.test/x?*** now"),
        ("error: file not found", "error: file not found"),
        ("AuthorizationRequired: server 'x' needs a login", "AuthorizationRequired: server 'x' needs a login"),
        ("token_count=12, db_password=pw", "token_count=12, db_password=***"),
    ],
)
def test_redact_text_secret_looking_parts(text: str, expected: str) -> None:
    """Values of secret-looking names, bearer tokens and URL credentials are masked; other text is kept."""
    assert redact_text(text) == expected


_SECRET_CHARS = st.text(alphabet=st.characters(categories=["L", "N"], include_characters="-_./+="), min_size=1)


@given(
    before=st.text(max_size=40),
    after=st.text(max_size=40),
    secret=_SECRET_CHARS.filter(lambda s: len(s) >= MIN_SECRET_LENGTH),
)
def test_redact_text_never_returns_a_known_secret(before: str, after: str, secret: str) -> None:
    """Whatever surrounds it, a known secret value never survives redact_text."""
    assert secret not in redact_text(before + secret + after, [secret])


def test_secret_filter_redacts_registered_secrets_only_while_registered() -> None:
    """The logging filter masks an open transport's secrets, and stops once the transport closes."""
    record = logging.LogRecord("mcp.client", logging.DEBUG, __file__, 1, "sending %s", (ENV_SECRET,), None)
    with registered_secrets([ENV_SECRET]):
        assert SecretFilter().filter(record)
        assert record.getMessage() == "sending ***"
    later = logging.LogRecord("mcp.client", logging.DEBUG, __file__, 1, "sending %s", ("plain-value-1",), None)
    assert SecretFilter().filter(later) and later.getMessage() == "sending plain-value-1"


def test_secret_filter_redacts_a_logged_traceback() -> None:
    """A traceback logged with exc_info carries no registered secret and no URL credentials."""
    logger = logging.getLogger("mcp_actors.test_secrets")
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.addFilter(SecretFilter())
    try:
        with registered_secrets([ENV_SECRET]):
            try:
                raise RuntimeError(f"failed with {ENV_SECRET} at {SECRET_URL}")
            except RuntimeError:
                logger.debug("connection failed", exc_info=True)
    finally:
        logger.removeHandler(handler)
    text = logging.Formatter().format(records[0])
    assert "RuntimeError: failed with *** at http://***@127.0.0.1:9/mcp?***" in text, text
    assert_clean(text)


def test_a_filter_pass_touches_only_the_loggers_created_since_the_last(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server's first stderr line creates its logger (``mcp_actors.server.<name>``), and each
    transport's start runs a pass; a pass that scanned every logger again cost a 20-server
    start ~1,200 ``getLogger`` calls (docs/performance.md)."""
    from mcp_actors._config import redact as _redact

    _redact.install_log_filter()
    looked_up: list[str] = []
    real_get_logger = logging.getLogger

    def counting(name: str | None = None) -> logging.Logger:
        looked_up.append(str(name))
        return real_get_logger(name)

    monkeypatch.setattr(logging, "getLogger", counting)
    new = real_get_logger(f"mcp_actors.server.pass-test-{id(looked_up)}")
    other = real_get_logger(f"elsewhere.pass-test-{id(looked_up)}")
    _redact.install_log_filter()
    assert looked_up == [new.name]
    assert _redact._FILTER in new.filters and _redact._FILTER not in other.filters
    _redact.install_log_filter()  # nothing new: no look-up at all
    assert looked_up == [new.name]
