"""Files we read as configuration that are no regular file (a FIFO, a device) or far too large.

Every reader (the config store, the token file, an ``envFile``, ``servers import FILE``)
refuses them at once, before reading a byte, with one typed error naming the path and what
to do: a FIFO never hangs the caller, ``/dev/zero`` and a 3 GiB sparse file never reach memory.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import trio
from filekit import fifo_at, sparse_file

from mcp_actors._auth.oauth import OAuthTarget, _read_private_key
from mcp_actors._auth.token_store import FileTokenStore
from mcp_actors._config.record import McpServerRecord, OAuthConfig, OAuthGrant, ServerConfig
from mcp_actors._config.store import ConfigStore
from mcp_actors._config.variables import load_env_file
from mcp_actors.errors import AuthorizationFailed, ConfigFileCorrupt, ConfigFileRefused, ServerMisconfigured
from mcp_actors.runtime import open_runtime

_AT_ONCE = 1.0  # seconds: a refusal needs no wait at all; a FIFO's reader is let go after 3 s


def _record(name: str) -> McpServerRecord:
    return McpServerRecord(name=name, type="stdio", config=ServerConfig(command="npx"))  # type: ignore[arg-type]


@contextlib.contextmanager
def _quick() -> Iterator[None]:
    start = time.monotonic()
    yield
    assert time.monotonic() - start < _AT_ONCE, "the reader waited on the FIFO"


def test_a_fifo_config_file_is_refused_at_once_and_left_alone(tmp_path: Path) -> None:
    """load() and modify() on a FIFO: a typed error naming the path at once; nothing written over it."""
    path = tmp_path / "mcp-config.json"
    store = ConfigStore(path)
    with fifo_at(path):
        with _quick(), pytest.raises(ConfigFileRefused, match="is a FIFO") as loading:
            store.load()
        with _quick(), pytest.raises(ConfigFileRefused, match="is a FIFO") as writing:
            store.modify(lambda records: records.append(_record("x")))
        assert stat.S_ISFIFO(path.stat().st_mode), "the FIFO was replaced"
    for error in (loading.value, writing.value):
        assert isinstance(error, ConfigFileCorrupt), "caught wherever a corrupt config is"
        assert error.path == str(path)
        assert error.reason == "is a FIFO (named pipe), not a regular file"
        assert str(path) in str(error) and "MCP_ACTORS_CONFIG" in str(error)
        assert "\n" not in str(error)


def test_a_fifo_swapped_in_between_the_check_and_the_open_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The descriptor opened is checked again: a regular file replaced by a FIFO just before the open."""
    path = tmp_path / "mcp-config.json"
    path.write_text('{"version": 1, "mcpServers": []}')
    real_open = os.open
    swaps: list[Path] = []
    with contextlib.ExitStack() as files:

        def swap_then_open(file: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            if Path(file) == path and not swaps:  # once: the FIFO's release thread opens it too
                swaps.append(files.enter_context(fifo_at(path)))
            return real_open(file, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", swap_then_open)
        with _quick(), pytest.raises(ConfigFileRefused, match="is a FIFO"):
            ConfigStore(path).load()
        assert swaps, "the FIFO was swapped in"


def test_a_directory_as_config_file_is_refused_like_a_fifo(tmp_path: Path) -> None:
    with pytest.raises(ConfigFileRefused, match="is a directory, not a regular file"):
        ConfigStore(tmp_path).load()


def test_a_fifo_token_file_is_refused_at_once(tmp_path: Path) -> None:
    """Reading and updating the token file: the typed error, never a wait for a writer."""
    path = tmp_path / "oauth-tokens.json"
    store = FileTokenStore(path)
    with fifo_at(path):
        with _quick(), pytest.raises(ConfigFileRefused, match=r"token file .* is a FIFO"):
            anyio.run(store.load, "srv")
        with _quick(), pytest.raises(ConfigFileRefused, match=r"token file .* is a FIFO"):
            anyio.run(store.forget, "srv")
        assert stat.S_ISFIFO(path.stat().st_mode)


def test_a_fifo_env_file_is_a_misconfiguration_at_once(tmp_path: Path) -> None:
    path = tmp_path / ".env"
    with fifo_at(path), _quick(), pytest.raises(ServerMisconfigured, match=r"envFile .* is a FIFO") as caught:
        load_env_file(str(path), server="files")
    assert caught.value.server == "files"


def test_a_fifo_private_key_file_is_an_authorization_failure_at_once(tmp_path: Path) -> None:
    path = tmp_path / "key.pem"
    oauth = OAuthConfig(grant=OAuthGrant.CLIENT_CREDENTIALS, client_id="c", private_key_file=str(path))
    target = OAuthTarget(server_id="s1", server_name="files", url="https://example.invalid/mcp", oauth=oauth)
    with fifo_at(path), _quick(), pytest.raises(AuthorizationFailed, match=r"privateKeyFile .* is a FIFO"):
        _read_private_key(target)


@pytest.mark.usefixtures("servers_in_memory")
async def test_a_runtime_whose_config_becomes_a_fifo_keeps_answering_and_exits(tmp_path: Path) -> None:
    """list() serves the servers it knew, add() fails with the refusal, and the runtime exits promptly."""
    cfg = tmp_path / "mcp-config.json"
    with contextlib.ExitStack() as files:
        async with open_runtime(cfg, connect_on_add=False, config_poll_interval=0) as rt:
            svc = rt.service
            await svc.add(_record("kept"))
            files.enter_context(fifo_at(cfg))
            with trio.fail_after(_AT_ONCE):
                assert [r.name for r in await svc.list()] == ["demo", "kept"]
            with trio.fail_after(_AT_ONCE), pytest.raises(ConfigFileRefused, match="is a FIFO"):
                await svc.add(_record("new"))
            with trio.fail_after(_AT_ONCE):
                assert [r.name for r in await svc.list()] == ["demo", "kept"]
            closing = trio.current_time()
        assert trio.current_time() - closing < 5.0, "the runtime's exit waited on the FIFO"


# A reader that reads /dev/zero or the sparse file whole fails here with MemoryError: the
# child's address space is capped far below the 3 GiB of the file.
_READERS = textwrap.dedent(
    """
    import json, sys
    import anyio
    from mcp_actors._auth.oauth import OAuthTarget, _read_private_key
    from mcp_actors._auth.token_store import FileTokenStore
    from mcp_actors._config.record import OAuthConfig
    from mcp_actors._config.store import ConfigStore
    from mcp_actors._config.variables import load_env_file
    from mcp_actors.cli import main

    def cli_import(path):
        try:
            return main(["servers", "import", path])
        except SystemExit as exit:
            return exit.code

    readers = {
        "config": lambda path: ConfigStore(path).load(),
        "token file": lambda path: anyio.run(FileTokenStore(path).load, "srv"),
        "envFile": lambda path: load_env_file(path, server="files"),
        "privateKeyFile": lambda path: _read_private_key(
            OAuthTarget(server_id="s1", server_name="files", url="https://x.invalid", oauth=OAuthConfig(
                grant="client_credentials", client_id="c", private_key_file=path))
        ),
        "servers import": cli_import,
    }
    for path in sys.argv[1:]:
        for what, read in readers.items():
            try:
                outcome = {"returned": repr(read(path))[:80]}
            except BaseException as exc:
                outcome = {"raised": type(exc).__name__, "message": str(exc)}
            print(json.dumps({"path": path, "reader": what, **outcome}), flush=True)
    """
)


def _capped_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1024**3, 1024**3))


def test_dev_zero_and_a_3_gib_sparse_file_are_refused_before_reading(tmp_path: Path) -> None:
    """Every reader refuses both at once, by their stat, in a process that could not hold 1 GiB."""
    huge = sparse_file(tmp_path / "huge.json")
    env = {**os.environ, "MCP_ACTORS_CONFIG": str(tmp_path / "mcp-config.json"), "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-c", _READERS, "/dev/zero", str(huge)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        preexec_fn=_capped_address_space,
    )
    outcomes = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(outcomes) == 10, done.stdout + done.stderr
    for outcome in outcomes:
        where = f"{outcome['reader']} on {outcome['path']}: {outcome}"
        if outcome["reader"] == "servers import":
            assert outcome.get("returned") == "2", where
            continue
        assert outcome.get("raised") in ("ConfigFileRefused", "ServerMisconfigured", "AuthorizationFailed"), where
        assert outcome["path"] in outcome["message"], where
        if outcome["path"] == "/dev/zero":
            assert "is a character device, not a regular file" in outcome["message"], where
        else:
            assert "is 3 GiB, more than the 16 MiB" in outcome["message"], where
    errors = [line for line in done.stderr.splitlines() if line.startswith("mcp-actors: error:")]
    assert len(errors) == 2 and "MemoryError" not in done.stderr, done.stderr
    assert "/dev/zero is a character device" in errors[0] and "servers import -" in errors[0]
    assert "is 3 GiB" in errors[1]
