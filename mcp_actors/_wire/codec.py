"""JSON on every wire: one rule to read what a server sends, one to write what we send.

Every transport decodes with :func:`decode` (stdio lines, HTTP JSON bodies, SSE messages)
and encodes with :func:`encode`, so a message means the same whatever carried it.

Reading is orjson's, where orjson is exact, and the standard library's where it is not:

* an integer wider than 64 bits: orjson makes it a float (``1000000000000000000123``
  arrives as ``1e+21``, silently). A message with a run of 19 digits anywhere (the
  shortest integer orjson cannot hold exactly has 19) is read by the standard library,
  which keeps every integer exact. The check is one ``translate`` and one substring search
  in C: ~0.3 us for a usual answer, and a false alarm (19 digits in a string) only costs
  speed;
* JSON that orjson refuses but the server's own JSON library calls valid: a lone surrogate
  escape (``"\\ud83d"``, a string ``JSON.stringify`` cut mid-emoji), ``NaN`` and
  ``Infinity`` (Python's ``json.dumps``). On orjson's error the standard library reads
  the message; what it refuses too is no JSON (:class:`ValueError`).

Writing is orjson's (pydantic models and sets through :func:`json_default`); what orjson
refuses (an integer wider than 64 bits, a string with a lone surrogate) is written by the
standard library, exact, with non-ASCII escaped.

An answer that is no JSON can still say whose answer it is: :func:`answer_id` reads the
top-level ``id`` of a broken answer, and :func:`unreadable` makes the stand-in answer a
wire delivers for it, which the dispatcher turns into a protocol error for that request.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

import orjson
import pydantic

__all__ = ["UNREADABLE", "answer_id", "decode", "encode", "json_default", "unreadable"]

_DIGITS: Final = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
"""``bytes.translate`` table: every digit becomes ``0``, every other byte a space."""
_WIDE: Final = b"0" * 19
"""A run of 19 digits: the shortest integer orjson may turn into a float (-9223372036854775809)."""

UNREADABLE: Final = "\x00mcp-actors:unreadable"
"""The key that marks a wire's stand-in answer for a message that was no JSON (see :func:`unreadable`)."""

_PARSE_ERROR: Final = -32700
_ANSWER_SCAN: Final = 1 << 16
"""Bytes of a broken message searched for its top-level id: the id comes first in every SDK's answers."""
_TOKEN: Final = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\]]', re.DOTALL)
_AFTER_KEY: Final = re.compile(rb'\s*:\s*(?:(-?\d+)(?![\d.eE])|("(?:[^"\\]|\\.)*"))', re.DOTALL)
_COLON: Final = re.compile(rb"\s*:")


def json_default(value: object) -> Any:
    """What orjson cannot encode by itself: pydantic models (as the SDK dumps them) and sets."""
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(by_alias=True, mode="json", exclude_none=True)
    if isinstance(value, set | frozenset):
        return list(value)
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def decode(data: bytes | bytearray) -> Any:
    """The JSON value of ``data`` by the one rule (see the module docstring).

    Raises:
        ValueError: ``data`` is no JSON (``json.JSONDecodeError``, or ``UnicodeDecodeError``
            for bytes that are not UTF-8).
    """
    if _WIDE in data.translate(_DIGITS):
        return json.loads(data)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def encode(message: Any, *, newline: bool = False) -> bytes:
    """``message`` as JSON bytes (with a final newline when asked), exact whatever orjson refuses.

    Raises:
        TypeError: A value no JSON can carry (an object that is no model, set, or JSON type).
    """
    try:
        return orjson.dumps(message, default=json_default, option=orjson.OPT_APPEND_NEWLINE if newline else None)
    except TypeError:  # orjson.JSONEncodeError: an integer beyond 64 bits, a lone surrogate
        text = json.dumps(message, default=json_default, separators=(",", ":"))
        return (text + "\n").encode() if newline else text.encode()


def unreadable(rpc_id: Any, reason: str) -> dict[str, Any]:
    """The stand-in a wire delivers for an answer to ``rpc_id`` that was no JSON.

    An error answer (``PARSE_ERROR`` with ``reason``) marked with :data:`UNREADABLE`, so the
    dispatcher raises a protocol error for the request (the server broke the protocol), not
    the error answer of a server that refused it.
    """
    return {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": _PARSE_ERROR, "message": reason}, UNREADABLE: True}


def answer_id(data: bytes | bytearray) -> int | str | None:
    """The top-level ``id`` of a message that is no JSON, if it reads as an answer's.

    Scans the first 64 KiB for the keys of the outermost object, skipping strings and
    nested values, so an ``"id"`` inside the result is never taken for the answer's. The
    id is returned only when the message has no top-level ``method`` (a request's id is
    not ours to fail) and its id is a plain integer or string; else ``None``.
    """
    end = min(len(data), _ANSWER_SCAN)
    depth = 0
    found: int | str | None = None
    for token in _TOKEN.finditer(data, 0, end):
        text = token.group()
        first = text[0]
        if first == 0x22:  # a string: a key of the outermost object when followed by a colon
            if depth != 1 or not _COLON.match(data, token.end()):
                continue
            if text == b'"method"':
                return None
            if text == b'"id"' and found is None:
                value = _AFTER_KEY.match(data, token.end())
                if value is None:
                    return None
                number, string = value.groups()
                try:
                    found = int(number) if number is not None else json.loads(string)
                except ValueError:
                    return None
        elif first in b"{[":
            depth += 1
        else:
            depth -= 1
            if depth <= 0:
                break
    return found
