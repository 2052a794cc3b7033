"""``mcp-actors serve``'s replica options refuse what cannot work before anything starts."""

from __future__ import annotations

import socket
from pathlib import Path

from clikit import invoke, write_config


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_a_short_or_missing_session_key_is_a_usage_error(tmp_path: Path) -> None:
    """Exit 2 naming the problem: a key under 32 bytes (file or environment), a file that is not there."""
    config = write_config(tmp_path / "cfg.json")
    (tmp_path / "key").write_text("too-short\n")
    short = invoke(config, "serve", "--port", "0", "--session-key-file", str(tmp_path / "key"))
    assert short.rc == 2 and "at least 32 bytes" in short.stderr
    from_env = invoke(config, "serve", "--port", "0", env={"MCP_ACTORS_SESSION_KEY": "short"})
    assert from_env.rc == 2 and "at least 32 bytes" in from_env.stderr
    missing = invoke(config, "serve", "--port", "0", "--session-key-file", str(tmp_path / "nope"))
    assert missing.rc == 2


def test_a_redis_that_does_not_answer_exits_3_without_its_password(tmp_path: Path) -> None:
    """--redis-url (or MCP_ACTORS_REDIS_URL) is checked at start: unavailable (3), the password never shown."""
    config = write_config(tmp_path / "cfg.json")
    url = f"redis://:s3cret-pw@127.0.0.1:{_closed_port()}/0"
    by_option = invoke(config, "serve", "--port", "0", "--redis-url", url)
    assert by_option.rc == 3 and "Redis" in by_option.stderr and "s3cret-pw" not in by_option.stderr
    by_env = invoke(config, "serve", "--port", "0", env={"MCP_ACTORS_REDIS_URL": url})
    assert by_env.rc == 3 and "s3cret-pw" not in by_env.stderr
