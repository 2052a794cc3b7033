"""Where mcp-actors keeps its state: the one rule, used by the process tracker and OAuth tokens.

The state directory holds what is not configuration but must survive a crash of the
host: the PID ledger (``processes/``) that lets the next run kill servers a crashed run
left behind, and OAuth tokens. It is chosen, first match wins:

1. ``$MCP_ACTORS_STATE_DIR``, when set (non-empty);
2. next to an explicitly chosen config file — ``config_path`` when given, else
   ``$MCP_ACTORS_CONFIG`` — as ``<config dir>/<config stem>.state/``
   (``/srv/agent/mcp-config.json`` → ``/srv/agent/mcp-config.state/``), so a config
   kept in a project or a container volume keeps its state with it, and two configs
   never share tokens;
3. the platform's per-user state directory (``~/.local/state/mcp-actors`` on Linux).

Every directory mcp-actors creates for its state or its config (the state directory, its
``processes/``, the token file's and the config file's directories, and any missing parent
of them) is made by :func:`make_private_dir`: mode 0700 whatever the umask, since they hold
tokens, API keys and the PIDs of the user's servers.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

__all__ = ["CONFIG_ENV_VAR", "PRIVATE_DIR_MODE", "STATE_DIR_ENV", "make_private_dir", "state_dir"]

STATE_DIR_ENV: Final = "MCP_ACTORS_STATE_DIR"
"""Environment variable naming the state directory (wins over every other rule)."""

CONFIG_ENV_VAR: Final = "MCP_ACTORS_CONFIG"
"""Environment variable naming the config file (the store's rule; written here, in a module with no
imports, because the command line declares it as ``--config``'s variable before it parses a flag)."""

PRIVATE_DIR_MODE: Final = 0o700
"""The mode of every directory created for state or config: its owner's only."""


def state_dir(config_path: str | os.PathLike[str] | None = None) -> Path:
    """The state directory for a config file (see the module docstring for the rule).

    Args:
        config_path: The config file chosen explicitly (``--config``, ``open_runtime(path)``);
            ``None`` falls back to ``$MCP_ACTORS_CONFIG``, then to the per-user directory.

    Returns:
        An absolute path; it is not created here (its users create what they need with
        :func:`make_private_dir`).
    """
    override = os.environ.get(STATE_DIR_ENV)
    if override:
        return Path(override).expanduser().absolute()
    chosen = config_path if config_path is not None else os.environ.get(CONFIG_ENV_VAR) or None
    if chosen is not None:
        config = Path(chosen).expanduser().absolute()
        return config.with_name(f"{config.stem}.state")
    import platformdirs  # only for this last rule: the other two need no import at all

    return Path(platformdirs.user_state_dir("mcp-actors", appauthor=False))


def make_private_dir(path: str | os.PathLike[str]) -> None:
    """Create the directory ``path`` and its missing parents, each mode 0700 whatever the umask.

    ``mkdir(mode=0o700)`` alone is not enough: the umask is subtracted from the mode (277
    leaves 0500, a directory its owner cannot write to), and ``Path.mkdir(parents=True)``
    makes the parents ``0777 & ~umask`` (0777 under a umask of 000). So each directory is
    made in turn and given its mode explicitly. Directories that exist are left as they
    are, a user's choice (``~`` or ``~/.local``), and so is one another process creates
    meanwhile.

    Raises:
        OSError: A directory cannot be created (permissions, a read-only file system), or
            ``path`` (or a parent) exists and is not a directory.
    """
    target = Path(path)
    missing: list[Path] = []
    for directory in (target, *target.parents):
        if directory.is_dir():
            break
        missing.append(directory)
    for directory in reversed(missing):
        try:
            os.mkdir(directory, PRIVATE_DIR_MODE)
        except FileExistsError:
            if not directory.is_dir():
                raise
            continue  # made by another process meanwhile: its mode is its maker's
        os.chmod(directory, PRIVATE_DIR_MODE)
