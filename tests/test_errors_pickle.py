"""Typed errors cross process boundaries (trio-parallel workers, multiprocessing) intact."""

from __future__ import annotations

import inspect
import pickle

import pytest

from mcp_actors import errors

_VALUES = {
    "url": "redis://127.0.0.1:6379/0",
    "path": "/tmp/cfg.json",
    "reason": "Read-only file system",
    "command": "npx",
    "cwd": "/nope",
    "timeout": 2.5,
    "placeholder": "${env:TOKEN}",
    "field": "config.env.TOKEN",
    "task_id": "t-1",
    "status": "failed",
    "method": "resources/read",
    "code": -32602,
    "limit": 1024,
    "profile": "coder",
}


def _build(cls: type[errors.McpActorsError]) -> errors.McpActorsError:
    kwargs = {}
    for name, param in inspect.signature(cls.__init__).parameters.items():
        if param.kind is param.KEYWORD_ONLY and param.default is param.empty:
            kwargs[name] = _VALUES[name]
    if "server" in inspect.signature(cls.__init__).parameters:
        kwargs["server"] = "files"
    return cls("something went wrong; do this", **kwargs)


@pytest.mark.parametrize("name", errors.__all__)
def test_every_error_round_trips_through_pickle(name: str) -> None:
    """Type, message and attributes survive pickling, as a worker process's error must reach its parent."""
    original = _build(getattr(errors, name))
    copy = pickle.loads(pickle.dumps(original))
    assert type(copy) is type(original)
    assert str(copy) == str(original)
    assert vars(copy) == vars(original)
