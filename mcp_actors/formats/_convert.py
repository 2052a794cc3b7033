"""Tool lists to provider definitions: the per-tool pipeline, its cache, and workers.

Each tool is converted on its own (``_convert_tool``: normalise, then the provider
profile) and the result is cached by the :class:`~mcp_actors.tools.MCPTool` value, so the
per-request call (:func:`~mcp_actors.formats.setup_mcp_tools`) re-normalises nothing it
has seen. Large uncached batches go to ``trio_parallel`` worker processes so the event
loop keeps running (see :data:`INLINE_CONVERSION_LIMIT`).
"""

from __future__ import annotations

import logging
import os
import pickle
import time
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any, Final, Literal

import attrs
import trio
import trio_parallel  # type: ignore[import-untyped]  # ships no py.typed

from mcp_actors.tools import MCPTool

from ._gemini import gemini_json_schema, gemini_parameters
from ._names import check_tool_ids
from ._openai import Unstrictable, strict_parameters
from ._report import ConversionNote, NoteAction
from ._schema import Notes, Schema, normalise_input_schema

__all__ = [
    "GEMINI_MAX_DECLARATIONS",
    "INLINE_CONVERSION_LIMIT",
    "ApiFormat",
    "OpenAIApi",
    "convert_mcp_tools_to_anthropic",
    "convert_mcp_tools_to_anthropic_with_report",
    "convert_mcp_tools_to_gemini",
    "convert_mcp_tools_to_gemini_with_report",
    "convert_mcp_tools_to_openai",
    "convert_mcp_tools_to_openai_with_report",
    "convert_tools",
    "convert_tools_async",
    "convert_tools_async_with_report",
    "convert_tools_with_report",
    "process_json_schema",
]

logger = logging.getLogger("mcp_actors.formats")

ApiFormat = Literal["openai", "anthropic", "google", "gemini"]
OpenAIApi = Literal["chat", "responses"]

INLINE_CONVERSION_LIMIT: Final = 5000
"""Uncached tools converted on the event loop alone; from this many on, workers share them.

Chosen with ``python -m benchmarks.conversion`` (Gemini profile, cold cache, corpus
tools cycled, median of 3; 2 cores, on a machine shared with other test runs, load
average 8-11, so single cells are noisy). The inline path checkpoints every 2 ms of
work, so it keeps the loop responsive at any size by itself; its longest stalls come
from the garbage collector and the machine's load, and the worker path has the same
ones. Workers only shorten the total, once the batch outlasts their start-up (a
process spawn and imports, ~0.4 s idle) and the pickling they cost the host (~0.45x a
conversion per tool they take). The benchmark's rule (smallest N where cold workers
are no slower than inline) gave 5000 in the run below; in earlier runs of a design
that handed the whole batch to workers, they never won up to 20000.

    tools  inline total  inline max stall  workers (cold) total  max stall
      100      0.19 s          45 ms             0.63 s            138 ms
     1000      0.19 s           7 ms             0.60 s             29 ms
     5000      9.3 s          263 ms             1.9 s             101 ms
    20000      4.2 s          200 ms            11.0 s             592 ms

(The full table, with warm workers and the blocking reference, is printed by the
benchmark and kept in its module docstring.)
"""

GEMINI_MAX_DECLARATIONS: Final = 512
"""Gemini's documented limit of function declarations in one tool list."""

_SLICE: Final = 0.002
"""Work done between two checkpoints on the inline path, in seconds (one tool at least)."""
_PICKLE: Final = pickle.HIGHEST_PROTOCOL

_WORK_CHUNK: Final = 100
"""Tools per job on the worker path (~15 ms of work: cheap to ship, quick to balance)."""
_WORKER_TIMEOUT: Final = 60.0
_CACHE_LIMIT: Final = 50_000


@attrs.frozen
class _Profile:
    provider: Literal["openai", "anthropic", "gemini"]
    strict: bool = False
    api: OpenAIApi = "chat"
    json_schema: bool = False


def _profile(api_format: str, *, strict: bool, api: str, json_schema: bool) -> _Profile:
    fmt = "gemini" if api_format == "google" else api_format
    if fmt not in ("openai", "anthropic", "gemini"):
        raise ValueError(f"api_format must be 'openai', 'anthropic', 'google' or 'gemini', got {api_format!r}")
    if api not in ("chat", "responses"):
        raise ValueError(f"api must be 'chat' or 'responses', got {api!r}")
    if fmt != "openai" and (strict or api != "chat"):
        raise ValueError(f"strict and api apply to api_format 'openai' only, not {api_format!r}")
    if fmt != "gemini" and json_schema:
        raise ValueError(f"json_schema applies to api_format 'gemini' only, not {api_format!r}")
    return _Profile(fmt, strict, api, json_schema)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- one tool


def _description(tool: MCPTool, extras: list[str]) -> str:
    text = tool.description if isinstance(tool.description, str) else ""
    if extras:
        text = (text + "\n\n" if text else "") + "\n".join(extras)
    return text


def _convert_tool(profile: _Profile, tool: MCPTool) -> tuple[Schema, tuple[ConversionNote, ...]]:
    """One tool to one provider definition (a plain function: it also runs in workers)."""
    notes = Notes(tool.id)
    schema, extras = normalise_input_schema(tool.input_schema, notes)
    description = _description(tool, extras)
    definition: Schema
    if profile.provider == "anthropic":
        definition = {"name": tool.id, "description": description, "input_schema": schema}
    elif profile.provider == "gemini":
        definition = {"name": tool.id, "description": description}
        if profile.json_schema:
            definition["parametersJsonSchema"] = gemini_json_schema(schema, notes)
        else:
            parameters = gemini_parameters(schema, notes)
            if parameters is not None:
                definition["parameters"] = parameters
    else:
        parameters = schema
        strict: bool | None = None
        if profile.strict:
            mark = len(notes.notes)
            try:
                parameters = strict_parameters(schema, notes)
                strict = True
            except Unstrictable as exc:
                del notes.notes[mark:]
                notes.add(
                    exc.path,
                    NoteAction.STRICT_FALLBACK,
                    f"strict mode cannot express {exc.reason}; the tool is sent with strict: false",
                )
                strict = False
        if profile.api == "responses":
            definition = {
                "type": "function",
                "name": tool.id,
                "description": description,
                "parameters": parameters,
                "strict": bool(strict),
            }
        else:
            function: Schema = {"name": tool.id, "description": description, "parameters": parameters}
            if strict is not None:
                function["strict"] = strict
            definition = {"type": "function", "function": function}
    return definition, tuple(notes.notes)


def _convert_batch(profile: _Profile, tools: Sequence[MCPTool]) -> list[tuple[Schema, tuple[ConversionNote, ...]]]:
    """Many tools, for one worker process."""
    return [_convert_tool(profile, tool) for tool in tools]


# ----------------------------------------------------------------------------- the cache

_Converted = tuple[Schema, tuple[ConversionNote, ...]]
_caches: dict[_Profile, dict[MCPTool, _Converted]] = {}


def _cache(profile: _Profile) -> dict[MCPTool, _Converted]:
    cache = _caches.get(profile)
    if cache is None:
        cache = _caches[profile] = {}
    return cache


def _store(cache: dict[MCPTool, _Converted], tool: MCPTool, converted: _Converted) -> None:
    if len(cache) >= _CACHE_LIMIT:
        # Drop the oldest quarter (dicts keep insertion order): cheap, and a tool set
        # that is in use is re-inserted on its next call.
        for key in list(cache)[: _CACHE_LIMIT // 4]:
            del cache[key]
    cache[tool] = converted


def _cached(tool: MCPTool, cache: dict[MCPTool, _Converted]) -> _Converted | None:
    try:
        return cache.get(tool)
    except TypeError:  # an unhashable stand-in for MCPTool: convert without caching
        return None


def _assemble(
    profile: _Profile, tools: list[MCPTool], results: list[_Converted]
) -> tuple[list[Schema], list[ConversionNote]]:
    # The cached definitions are shared: hand out fresh outer dicts so that a caller
    # adding a key (cache_control, strict) never edits the cache. Schemas stay shared.
    notes: list[ConversionNote] = []
    for _, tool_notes in results:
        notes.extend(tool_notes)
    if profile.provider == "gemini":
        if not results:
            return [], notes
        if len(results) > GEMINI_MAX_DECLARATIONS:
            notes.append(
                ConversionNote(
                    tool_id=tools[GEMINI_MAX_DECLARATIONS].id,
                    path="",
                    action=NoteAction.LIMIT,
                    detail=f"{len(results)} function declarations; Gemini accepts at most {GEMINI_MAX_DECLARATIONS}",
                )
            )
        return [{"functionDeclarations": [dict(d) for d, _ in results]}], notes
    if profile.provider == "openai" and profile.api == "chat":
        return [{**d, "function": dict(d["function"])} for d, _ in results], notes
    return [dict(d) for d, _ in results], notes


def _convert_inline(profile: _Profile, tools: list[MCPTool]) -> list[_Converted]:
    cache = _cache(profile)
    results = []
    for tool in tools:
        hit = _cached(tool, cache)
        if hit is None:
            hit = _convert_tool(profile, tool)
            try:
                _store(cache, tool, hit)
            except TypeError:
                pass
        results.append(hit)
    return results


def convert_tools_with_report(
    tools: Iterable[MCPTool],
    api_format: ApiFormat | str,
    *,
    strict: bool = False,
    api: OpenAIApi | str = "chat",
    json_schema: bool = False,
) -> tuple[list[Schema], list[ConversionNote]]:
    """Convert tools for any provider, with the report (the one entry all others use).

    Args:
        tools: The tools; each one's ``id`` is the function name the model sees.
        api_format: ``"openai"``, ``"anthropic"``, ``"google"`` or ``"gemini"``.
        strict: OpenAI only: strict mode (tools it cannot express fall back, reported).
        api: OpenAI only: ``"chat"`` (Chat Completions) or ``"responses"``.
        json_schema: Gemini only: emit ``parametersJsonSchema``.

    Returns:
        The provider's tool list and the notes of every change made.

    Raises:
        InvalidToolName: A tool id breaks the providers' name rule or is repeated.
        ValueError: An unknown ``api_format`` or an option that does not apply to it.
    """
    profile = _profile(api_format, strict=strict, api=api, json_schema=json_schema)
    tool_list = list(tools)
    check_tool_ids(tool_list)
    return _assemble(profile, tool_list, _convert_inline(profile, tool_list))


def convert_tools(
    tools: Iterable[MCPTool],
    api_format: ApiFormat | str,
    *,
    strict: bool = False,
    api: OpenAIApi | str = "chat",
    json_schema: bool = False,
) -> list[Schema]:
    """Like :func:`convert_tools_with_report`, without the report."""
    return convert_tools_with_report(tools, api_format, strict=strict, api=api, json_schema=json_schema)[0]


async def convert_tools_async_with_report(
    tools: Iterable[MCPTool],
    api_format: ApiFormat | str,
    *,
    strict: bool = False,
    api: OpenAIApi | str = "chat",
    json_schema: bool = False,
) -> tuple[list[Schema], list[ConversionNote]]:
    """Convert tools without stalling the event loop, with the report.

    Cached tools cost a dictionary lookup. Fewer than :data:`INLINE_CONVERSION_LIMIT`
    uncached tools are converted here, with a checkpoint every 2 ms of work; from that
    many on, ``trio_parallel`` worker processes share the batch with this task, chunk
    by chunk (a batch never waits for a worker that is slow to start; a worker that
    fails gives its chunk back and a warning is logged).

    Cancellation: cancelling the call abandons the conversion (busy workers are
    killed) and caches nothing of it.

    Args and raises are those of :func:`convert_tools_with_report`.
    """
    profile = _profile(api_format, strict=strict, api=api, json_schema=json_schema)
    tool_list = list(tools)
    check_tool_ids(tool_list)
    cache = _cache(profile)
    missing = [tool for tool in tool_list if _cached(tool, cache) is None]
    done = await _convert_missing(profile, missing, use_workers=len(missing) >= INLINE_CONVERSION_LIMIT)
    results = []
    for tool, converted in zip(missing, done, strict=True):
        try:
            _store(cache, tool, converted)
        except TypeError:  # an unhashable stand-in for MCPTool
            pass
    by_identity = {id(tool): converted for tool, converted in zip(missing, done, strict=True)}
    for tool in tool_list:
        hit = by_identity.get(id(tool)) or _cached(tool, cache)
        if hit is None:  # evicted meanwhile by a huge concurrent batch
            hit = _convert_tool(profile, tool)
        results.append(hit)
    return _assemble(profile, tool_list, results)


async def convert_tools_async(
    tools: Iterable[MCPTool],
    api_format: ApiFormat | str,
    *,
    strict: bool = False,
    api: OpenAIApi | str = "chat",
    json_schema: bool = False,
) -> list[Schema]:
    """Like :func:`convert_tools_async_with_report`, without the report."""
    result = await convert_tools_async_with_report(tools, api_format, strict=strict, api=api, json_schema=json_schema)
    return result[0]


async def _convert_missing(profile: _Profile, tools: list[MCPTool], *, use_workers: bool) -> list[_Converted]:
    """Convert ``tools`` without a long stall: in workers, or inline in time slices."""
    if use_workers and tools:
        return await _convert_in_workers(profile, tools)
    done: list[_Converted] = []
    deadline = time.perf_counter() + _SLICE
    for tool in tools:
        done.append(_convert_tool(profile, tool))
        if time.perf_counter() >= deadline:
            await trio.lowlevel.checkpoint()
            deadline = time.perf_counter() + _SLICE
    await trio.lowlevel.checkpoint()
    return done


async def _sliced(items: Sequence[Any], fn: Any) -> list[Any]:
    """``[fn(item) for item in items]``, with a checkpoint every :data:`_SLICE` seconds."""
    out = []
    deadline = time.perf_counter() + _SLICE
    for item in items:
        out.append(fn(item))
        if time.perf_counter() >= deadline:
            await trio.lowlevel.checkpoint()
            deadline = time.perf_counter() + _SLICE
    return out


def _convert_pickled(profile: _Profile, payload: list[bytes]) -> list[bytes]:
    """The worker's job: pickled tools in, pickled ``(definition, notes)`` out, per tool.

    Both directions are lists of small byte strings, so neither side ever (un)pickles
    one big object on the event loop: the host does it tool by tool, in time slices.
    """
    return [pickle.dumps(_convert_tool(profile, pickle.loads(item)), _PICKLE) for item in payload]


async def _convert_in_workers(profile: _Profile, tools: list[MCPTool]) -> list[_Converted]:
    """Share the batch between this task and worker processes, chunk by chunk.

    Chunks are taken from one queue by the host (converting inline, in time slices)
    and by ``cpu_count - 1`` workers (the host keeps a core). The host starts at once,
    so nothing waits for the workers to start; each side takes more while it is faster.
    When the queue is empty the host converts the chunks still out with the workers
    itself and stops them (killing any still busy), so a batch never waits for a slow
    or still-starting worker: it takes at most as long as the host alone. A worker that
    fails (it cannot start, it breaks, a chunk cannot be pickled, or a chunk takes more
    than :data:`_WORKER_TIMEOUT`) gives its chunk back and stops.
    """
    results: list[_Converted | None] = [None] * len(tools)
    queue = deque(range(0, len(tools), _WORK_CHUNK))
    out_with_workers: set[int] = set()

    async def convert_here(start: int) -> None:
        part = tools[start : start + _WORK_CHUNK]
        for i, converted in enumerate(await _convert_missing(profile, part, use_workers=False)):
            results[start + i] = converted

    async def worker() -> None:
        while queue:
            start = queue.popleft()
            out_with_workers.add(start)
            try:
                part = tools[start : start + _WORK_CHUNK]
                payload = await _sliced(part, lambda tool: pickle.dumps(tool, _PICKLE))
                with trio.fail_after(_WORKER_TIMEOUT):
                    output = await trio_parallel.run_sync(_convert_pickled, profile, payload, kill_on_cancel=True)
                converted = await _sliced(output, pickle.loads)
            except (
                trio.TooSlowError,
                trio_parallel.BrokenWorkerError,
                OSError,
                pickle.PicklingError,
                TypeError,
                AttributeError,
            ) as exc:
                # a worker that cannot start or broke, or a schema holding a Python object
                logger.warning("tool conversion in a worker process failed (%r); converting inline", exc)
                out_with_workers.discard(start)
                queue.appendleft(start)
                return
            results[start : start + len(converted)] = converted
            out_with_workers.discard(start)
            logger.debug("converted %d tools in a worker process", len(converted))

    async with trio.open_nursery() as nursery:
        for _ in range(max(1, (os.cpu_count() or 2) - 1)):
            nursery.start_soon(worker)
        while queue:
            await convert_here(queue.popleft())
        for start in sorted(out_with_workers):
            await convert_here(start)
        nursery.cancel_scope.cancel()
    for start in range(0, len(tools), _WORK_CHUNK):
        # given back by a failing worker, or taken by one that was then stopped
        if any(r is None for r in results[start : start + _WORK_CHUNK]):
            await convert_here(start)
    return results  # type: ignore[return-value]


# ----------------------------------------------------------------------------- public face


def process_json_schema(schema: Any) -> Schema:
    """Make any schema a server sends into a clean JSON Schema object (provider-neutral).

    As in the reference design: an empty or non-object schema becomes
    ``{"type": "object", "properties": {}, "required": []}``; an object schema keeps its
    properties, required and description; anything else is wrapped as an object. On top
    of that, the shared normalisation (``definitions`` → ``$defs``, refs made local
    and canonical, ``oneOf`` → ``anyOf``, ``const`` → ``enum``, ``allOf`` merged where
    it has one branch or sits at the root, root unions folded, ``required`` limited to
    existing properties, arrays always with ``items``). Root information that no longer
    fits is appended to the root description.

    Args:
        schema: The server's input schema (any value).

    Returns:
        A new dict; the argument is not modified.
    """
    notes = Notes("")
    out, extras = normalise_input_schema(schema, notes)
    if extras:
        base = out.get("description")
        out["description"] = (base + "\n\n" if base else "") + "\n".join(extras)
    return out


def convert_mcp_tools_to_openai_with_report(
    tools: Iterable[MCPTool], *, strict: bool = False, api: OpenAIApi | str = "chat"
) -> tuple[list[Schema], list[ConversionNote]]:
    """OpenAI tool definitions and the report of what was changed.

    Chat Completions (``api="chat"``): ``{"type": "function", "function": {"name",
    "description", "parameters"[, "strict"]}}``. Responses (``api="responses"``):
    ``{"type": "function", "name", "description", "parameters", "strict"}`` (the
    Responses API treats a missing ``strict`` as true, so it is always given).

    With ``strict=True`` every object gets ``additionalProperties: false`` and lists
    all its properties as required (optional ones made nullable), and keywords strict
    mode rejects are restated in descriptions. A tool strict mode cannot express (a
    free-form object, an untyped value, an ``allOf`` that does not merge, a size limit)
    is sent with ``strict: false`` and reported as ``NoteAction.STRICT_FALLBACK``.

    Raises:
        InvalidToolName: A tool id breaks the providers' name rule or is repeated.
        ValueError: ``api`` is not ``"chat"`` or ``"responses"``.
    """
    return convert_tools_with_report(tools, "openai", strict=strict, api=api)


def convert_mcp_tools_to_openai(
    tools: Iterable[MCPTool], *, strict: bool = False, api: OpenAIApi | str = "chat"
) -> list[Schema]:
    """OpenAI tool definitions (see :func:`convert_mcp_tools_to_openai_with_report`)."""
    return convert_tools_with_report(tools, "openai", strict=strict, api=api)[0]


def convert_mcp_tools_to_anthropic_with_report(
    tools: Iterable[MCPTool],
) -> tuple[list[Schema], list[ConversionNote]]:
    """Anthropic tool definitions (``{"name", "description", "input_schema"}``) and report.

    The input schema is the normalised JSON Schema: an object at the root with no
    ``anyOf``/``oneOf``/``allOf`` there, which Anthropic rejects.

    Raises:
        InvalidToolName: A tool id breaks the providers' name rule or is repeated.
    """
    return convert_tools_with_report(tools, "anthropic")


def convert_mcp_tools_to_anthropic(tools: Iterable[MCPTool]) -> list[Schema]:
    """Anthropic tool definitions (see :func:`convert_mcp_tools_to_anthropic_with_report`)."""
    return convert_tools_with_report(tools, "anthropic")[0]


def convert_mcp_tools_to_gemini_with_report(
    tools: Iterable[MCPTool], *, json_schema: bool = False
) -> tuple[list[Schema], list[ConversionNote]]:
    """Gemini tools, ``[{"functionDeclarations": [...]}]``, and the report.

    By default each declaration's ``parameters`` is Gemini's OpenAPI subset: refs
    inlined (recursion unrolled twice, then a described string), ``anyOf`` with null
    and type lists as ``nullable``/``anyOf``, string-only enums, formats other than
    ``enum``/``date-time`` and unsupported keywords restated in descriptions, a tool
    without parameters has no ``parameters``. With ``json_schema=True`` the declarations
    carry ``parametersJsonSchema`` (the normalised JSON Schema without ``$schema`` and
    ``title``, only ``description`` beside a ``$ref``). An empty tool list gives ``[]``.

    Raises:
        InvalidToolName: A tool id breaks the providers' name rule or is repeated.
    """
    return convert_tools_with_report(tools, "gemini", json_schema=json_schema)


def convert_mcp_tools_to_gemini(tools: Iterable[MCPTool], *, json_schema: bool = False) -> list[Schema]:
    """Gemini tools (see :func:`convert_mcp_tools_to_gemini_with_report`)."""
    return convert_tools_with_report(tools, "gemini", json_schema=json_schema)[0]
