"""convert_tools_async: inline in time slices below the limit, trio_parallel workers above."""

from __future__ import annotations

import itertools
import logging
import multiprocessing.resource_tracker
import os
import pickle
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
import trio
import trio.testing
import trio_parallel
from formats_checks import check_definitions, corpus_tools, make_tool

from mcp_actors.formats import (
    INLINE_CONVERSION_LIMIT,
    convert_tools_async,
    convert_tools_async_with_report,
    convert_tools_with_report,
)
from mcp_actors.formats import _convert as convert_module
from mcp_actors.tools import MCPTool

_batch = itertools.count()


def fresh(count: int) -> list[MCPTool]:
    """``count`` corpus tools under ids never converted before (so nothing is cached)."""
    corpus = corpus_tools()
    prefix = f"b{next(_batch)}"
    return [attrs.evolve(corpus[i % len(corpus)], id=f"{prefix}_{i}") for i in range(count)]


def renamed(definitions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Gemini declarations without their names (to compare two batches with different ids)."""
    return [{k: v for k, v in d.items() if k != "name"} for d in definitions[0]["functionDeclarations"]]


@pytest.fixture
def stop_resource_tracker() -> Iterator[None]:
    """Stop multiprocessing's resource tracker after a test that started workers.

    Spawning the first worker starts that helper process, which otherwise lives as long
    as the interpreter; the suite checks that no test leaves a process behind.
    """
    yield
    multiprocessing.resource_tracker._resource_tracker._stop()


def test_the_limit_is_positive() -> None:
    """The threshold chosen by the benchmark is a positive tool count."""
    assert isinstance(INLINE_CONVERSION_LIMIT, int) and INLINE_CONVERSION_LIMIT > 0


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


@pytest.mark.usefixtures("stop_resource_tracker")
async def test_large_batches_are_shared_with_worker_processes(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """At or above the limit, worker processes take part; the result equals the inline one."""
    inline_tools, worker_tools = fresh(1500), fresh(1500)
    inline = convert_tools_with_report(inline_tools, "gemini")
    monkeypatch.setattr(convert_module, "INLINE_CONVERSION_LIMIT", 10)
    async with trio_parallel.cache_scope():
        # a started worker that has converted before (so it has imported the converters)
        await trio_parallel.run_sync(convert_module._convert_pickled, convert_module._Profile("gemini"), [])
        with caplog.at_level(logging.DEBUG, logger="mcp_actors.formats"):
            definitions, notes = await convert_tools_async_with_report(worker_tools, "gemini")
    assert any("in a worker process" in r.getMessage() for r in caplog.records)
    sample = slice(0, 1500, 25)  # the whole corpus is validated elsewhere; these are its copies
    declarations = definitions[0]["functionDeclarations"][sample]
    check_definitions("gemini", {}, worker_tools[sample], [{"functionDeclarations": declarations}], [])
    assert renamed(definitions) == renamed(inline[0])
    assert [(n.path, n.action, n.detail) for n in notes] == [(n.path, n.action, n.detail) for n in inline[1]]
    # converted once, cached for the next request
    assert convert_tools_with_report(worker_tools, "gemini") == (definitions, notes)


@pytest.mark.usefixtures("stop_resource_tracker")
async def test_worker_job_converts_in_another_process_like_the_host() -> None:
    """The worker's job, run in a real worker process, gives exactly the host's conversion."""
    tools = fresh(30)
    profile = convert_module._Profile("openai", strict=True)
    payload = [pickle.dumps(tool) for tool in tools]
    async with trio_parallel.cache_scope():
        pid = await trio_parallel.run_sync(os.getpid)
        output = await trio_parallel.run_sync(convert_module._convert_pickled, profile, payload)
    assert pid != os.getpid()
    assert [pickle.loads(item) for item in output] == [convert_module._convert_tool(profile, t) for t in tools]


async def test_tools_that_cannot_be_pickled_are_converted_inline(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A schema holding a Python object cannot go to a worker: the host converts those tools."""
    schema = {"type": "object", "properties": {"a": {"type": "string", "default": lambda: None}}}
    tools = [make_tool(schema, name=f"unpicklable{i}") for i in range(500)]
    monkeypatch.setattr(convert_module, "INLINE_CONVERSION_LIMIT", 1)
    with caplog.at_level(logging.WARNING, logger="mcp_actors.formats"):
        definitions = await convert_tools_async(tools, "anthropic")
    assert len(definitions) == 500
    assert all(d["input_schema"]["properties"]["a"]["type"] == "string" for d in definitions)
    assert any("converting inline" in r.getMessage() for r in caplog.records)


@pytest.mark.usefixtures("stop_resource_tracker")
async def test_cancelling_a_worker_conversion_returns_promptly(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cancelling while a worker converts ends the call at once; the worker is killed, not awaited."""
    monkeypatch.setattr(convert_module, "INLINE_CONVERSION_LIMIT", 10)
    tools = fresh(1000)
    async with trio_parallel.cache_scope():
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(convert_tools_async, tools, "gemini")
                await trio.testing.wait_all_tasks_blocked()  # the host is done; a worker is busy
                nursery.cancel_scope.cancel()
            assert nursery.cancel_scope.cancelled_caught
    assert convert_module._cached(tools[-1], convert_module._cache(convert_module._Profile("gemini"))) is None
