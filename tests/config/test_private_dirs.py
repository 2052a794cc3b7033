"""Every directory mcp-actors creates for its state or its config is 0700, whatever the umask.

The state directory holds OAuth tokens and the PID ledger, the config directory API keys:
under a umask of 000 they must not come out world-writable (0777), under a umask of 277
not unwritable for their owner (0500). Directories that existed before are left as they are.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest

from mcp_actors._auth.token_store import FileTokenStore
from mcp_actors._config.store import ConfigStore
from mcp_actors._process.kill import Target
from mcp_actors._process.ledger import Ledger


@pytest.fixture(params=[0o000, 0o277], ids=lambda umask: f"umask-{umask:03o}")
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """The process's umask for the test, restored after it."""
    previous = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(previous)


def _write_ledger(state: Path) -> None:
    ledger = Ledger(path=state / "processes" / "host-x.json", host=Target(os.getpid(), 1.0, os.getpid()), marker="x")
    ledger.write([])
    assert (state / "processes" / "host-x.json").exists()


def _write_tokens(state: Path) -> None:
    anyio.run(FileTokenStore(state / "oauth-tokens.json").update, "srv", "https://x.invalid/mcp", lambda entry: None)


def _write_config(config_dir: Path) -> None:
    ConfigStore(config_dir / "mcp-config.json").save([])


@pytest.mark.usefixtures("umask")
@pytest.mark.parametrize(
    ("write", "leaf"),
    [(_write_ledger, "processes"), (_write_tokens, None), (_write_config, None)],
    ids=["ledger", "token-file", "config-file"],
)
def test_every_directory_created_is_0700(tmp_path: Path, write: Callable[[Path], None], leaf: str | None) -> None:
    before = stat.S_IMODE(tmp_path.stat().st_mode)
    top = tmp_path / "home"
    where = top / ".local" / "state" / "mcp-actors"
    write(where)
    created = [top, top / ".local", top / ".local" / "state", where]
    if leaf is not None:
        created.append(where / leaf)
    modes = {str(d.relative_to(tmp_path)): oct(stat.S_IMODE(d.stat().st_mode)) for d in created}
    assert modes == dict.fromkeys(modes, oct(0o700))
    assert stat.S_IMODE(tmp_path.stat().st_mode) == before, "a directory that existed was changed"


@pytest.mark.usefixtures("umask")
def test_the_token_file_beside_a_ledger_lives_in_a_0700_directory(tmp_path: Path) -> None:
    """The ledger makes the state directory first (as a runtime does); the tokens then go into it."""
    state = tmp_path / "state"
    _write_ledger(state)
    _write_tokens(state)
    assert oct(stat.S_IMODE(state.stat().st_mode)) == oct(0o700)
    assert oct(stat.S_IMODE((state / "oauth-tokens.json").stat().st_mode)) == oct(0o600)
