"""convert_tools_async: on the calling task, in time slices, whatever the size."""

from __future__ import annotations

import itertools
from typing import Any

import attrs
import trio
import trio.testing
from formats_checks import corpus_tools, make_tool

from mcp_actors.formats import _convert as convert_module
from mcp_actors.formats import (
    convert_tools_async,
    convert_tools_async_with_report,
    convert_tools_with_report,
)
from mcp_actors.tools import McpTool

_batch = itertools.count()


def fresh(count: int) -> list[McpTool]:
    """``count`` corpus tools under ids never converted before (so nothing is cached)."""
    corpus = corpus_tools()
    prefix = f"b{next(_batch)}"
    return [attrs.evolve(corpus[i % len(corpus)], id=f"{prefix}_{i}") for i in range(count)]


def renamed(definitions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Gemini declarations without their names (to compare two batches with different ids)."""
    return [{k: v for k, v in d.items() if k != "name"} for d in definitions[0]["functionDeclarations"]]


async def test_async_result_equals_the_sync_result() -> None:
    """The async path returns what the sync converters return, notes included."""
    tools = fresh(40)
    async_result = await convert_tools_async_with_report(tools, "openai", strict=True)
    sync_result = convert_tools_with_report(fresh(0) + tools, "openai", strict=True)
    assert async_result == sync_result
    assert await convert_tools_async(tools, "openai", strict=True) == sync_result[0]


async def test_inline_conversion_lets_other_tasks_run() -> None:
    """Converting hundreds of uncached tools yields to the event loop again and again."""
    tools = fresh(400)
    ticks = 0
    done = False

    async def ticker() -> None:
        nonlocal ticks
        while not done:
            ticks += 1
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        await trio.lowlevel.checkpoint()
        start = ticks
        definitions = await convert_tools_async(tools, "gemini")
        done = True
    assert len(definitions[0]["functionDeclarations"]) == 400
    assert ticks - start >= 3


async def test_tools_holding_python_objects_convert() -> None:
    """A schema holding a Python object (nothing needs to pickle it) converts on the host."""
    schema = {"type": "object", "properties": {"a": {"type": "string", "default": lambda: None}}}
    tools = [make_tool(schema, name=f"unpicklable{i}") for i in range(500)]
    definitions = await convert_tools_async(tools, "anthropic")
    assert len(definitions) == 500
    assert all(d["input_schema"]["properties"]["a"]["type"] == "string" for d in definitions)


async def test_cancelling_a_conversion_returns_promptly_and_a_retry_completes_it() -> None:
    """Cancelling a large conversion mid-way ends it at its next checkpoint; a retry reuses the work and is correct."""
    tools = fresh(3000)
    start = convert_module.statistics().tools_converted
    with trio.fail_after(60):
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(convert_tools_async, tools, "gemini")
                while convert_module.statistics().tools_converted == start:  # until it has converted some
                    await trio.lowlevel.checkpoint()
                scope.cancel()
        assert scope.cancelled_caught
    converted_before_cancel = convert_module.statistics().tools_converted - start
    assert 0 < converted_before_cancel < 3000
    before = convert_module.statistics()
    assert await convert_tools_async(tools, "gemini") == convert_tools_with_report(fresh(0) + tools, "gemini")[0]
    retried = convert_module.statistics().tools_converted - before.tools_converted
    assert retried == 3000 - converted_before_cancel  # earlier work was kept
