"""A tool call's own input, checked before anything is sent: its arguments and its timeout.

One home for the rule, used by :meth:`McpService.call_tool` (every host's way in: the
facade, the adapters, the portals and the CLI). What JSON cannot carry is the caller's
error (:class:`~mcp_actors.errors.InvalidCallInput`, naming the field), never a protocol
error blamed on the server, and never a silent change: the wire's encoder writes ``NaN``
and infinities as ``null``.

The walk costs ~1 µs for a call's usual few arguments; a string or a number of any size is
one type test.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import orjson
import pydantic

from mcp_actors.errors import InvalidCallInput

__all__ = ["checked_arguments", "check_timeout"]


def checked_arguments(arguments: object, *, server: str, tool: str) -> dict[str, Any]:
    """``arguments`` as the dict the call sends, or :class:`InvalidCallInput` naming what is wrong.

    ``None`` is no arguments. Accepted: a mapping with string keys whose values are what the
    wire's encoder writes as JSON (strings, ints, bools, ``None``, finite floats, mappings,
    lists, tuples, sets, pydantic models, and what orjson encodes natively).
    """
    if arguments is None:
        return {}
    if not isinstance(arguments, Mapping):
        raise _invalid(
            f"the arguments are a {type(arguments).__name__}, not a JSON object;"
            " pass a dict of argument names to values",
            server=server,
            tool=tool,
            field="arguments",
        )
    args = dict(arguments)
    problem = _problem(args, "arguments")
    if problem is not None:
        where, what = problem
        raise _invalid(what, server=server, tool=tool, field=where)
    return args


def check_timeout(timeout: object, *, server: str, tool: str | None, default: str = "the server's callTimeout") -> None:
    """Refuse a timeout that bounds nothing: it must be ``None`` or a positive, finite number of seconds."""
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not (0 < timeout < math.inf):
        raise _invalid(
            f"timeout is {timeout!r}; it must be a positive, finite number of seconds (or None for {default})",
            server=server,
            tool=tool,
            field="timeout",
        )


def _invalid(what: str, *, server: str, tool: str | None, field: str) -> InvalidCallInput:
    call = f"call to {tool!r} of server {server!r}" if tool is not None else f"server {server!r}"
    return InvalidCallInput(f"{call}: {what}", server=server, tool=tool, field=field)


def _problem(value: object, path: str) -> tuple[str, str] | None:
    """The first value under ``value`` JSON cannot carry, as ``(its path, what is wrong)``."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return None
    if isinstance(value, float):
        if math.isfinite(value):
            return None
        return path, f"{path} is {value!r}, not a finite number; JSON has no NaN or infinity"
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return path, f"{path} has the key {key!r}: JSON object keys must be strings"
            problem = _problem(item, f"{path}.{key}")
            if problem is not None:
                return problem
        return None
    if isinstance(value, list | tuple | set | frozenset):
        for index, item in enumerate(value):
            problem = _problem(item, f"{path}[{index}]")
            if problem is not None:
                return problem
        return None
    if isinstance(value, str | int | pydantic.BaseModel):
        return None  # str and int subclasses (enums), and models: the encoder writes them
    try:
        orjson.dumps(value)  # what orjson encodes natively: datetimes, UUIDs, dataclasses, ...
    except TypeError:
        return path, f"{path} is a {type(value).__name__}, which cannot be sent as JSON"
    return None
