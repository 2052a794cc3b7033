"""Tool lists to provider definitions: the per-tool pipeline and its two caches.

Each tool is converted on its own (``_convert_tool``: normalise, then the provider
profile). Two caches make the per-request call
(:func:`~mcp_actors.formats.setup_mcp_tools`) cheap:

* per server: the converted definitions of one server's run of tools, per profile,
  valid while the caller passes the very same :class:`~mcp_actors.tools.McpTool`
  objects (the registry hands out the same objects while a server's tools, record and
  ids are unchanged). A hit costs one identity comparison per tool: no hashing, no
  lookups, no id checks beyond uniqueness. This makes a cached setup O(servers).
* per tool value: a server whose list changed (new objects) re-converts only the tools
  whose value changed.

Uncached tools are converted on the calling task, with a checkpoint every 2 ms of work,
so even a 20,000-tool conversion never stalls the event loop for long. (Worker
processes were measured and dropped: on this workload they were slower than the inline
path, their longest stall was no better, and spawning them re-ran a host script that
lacked a ``__main__`` guard.)
"""

from __future__ import annotations

import logging
import operator
import time
from collections.abc import Generator, Iterable
from typing import Any, Final, Literal

import attrs
import trio

from mcp_actors.tools import McpTool

from ._gemini import gemini_json_schema, gemini_parameters
from ._names import check_tool_ids
from ._openai import Unstrictable, strict_parameters
from ._report import ConversionNote, NoteAction
from ._schema import Notes, Schema, normalise_input_schema

__all__ = [
    "GEMINI_MAX_DECLARATIONS",
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

GEMINI_MAX_DECLARATIONS: Final = 512
"""Gemini's documented limit of function declarations in one tool list."""

_SLICE: Final = 0.002
"""Work done between two checkpoints on the async path, in seconds (one tool at least)."""
_CACHE_LIMIT: Final = 50_000
"""Tool conversions kept per profile (the oldest quarter is dropped beyond it)."""
_ASSEMBLY_CHUNK: Final = 500
"""Definitions copied between two looks at the clock while assembling the answer."""
_SERVER_CACHE_LIMIT: Final = 4096
"""Server runs kept, all profiles together (the oldest quarter is dropped beyond it)."""


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


def _description(tool: McpTool, extras: list[str]) -> str:
    text = tool.description if isinstance(tool.description, str) else ""
    if extras:
        text = (text + "\n\n" if text else "") + "\n".join(extras)
    return text


def _convert_tool(profile: _Profile, tool: McpTool) -> tuple[Schema, tuple[ConversionNote, ...]]:
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


# ----------------------------------------------------------------------------- the caches

_Converted = tuple[Schema, tuple[ConversionNote, ...]]
_caches: dict[_Profile, dict[McpTool, _Converted]] = {}


@attrs.frozen(eq=False)
class _ServerEntry:
    """One server's run of tools, by identity, and their conversions in that order."""

    tools: tuple[McpTool, ...]
    results: tuple[_Converted, ...]


_ServerKey = tuple[_Profile, str, int]
"""(profile, server id, how many runs of that server came before in the same list)."""
_server_caches: dict[_ServerKey, _ServerEntry] = {}


@attrs.define(eq=False)
class _Counters:
    tools_converted: int = 0
    tool_cache_lookups: int = 0
    server_cache_hits: int = 0
    server_cache_misses: int = 0


@attrs.frozen(kw_only=True)
class _Statistics:
    """A snapshot of the conversion counters (process-wide, since import).

    Attributes:
        tools_converted: Tools run through the converter (cache misses of both caches).
        tool_cache_lookups: Lookups in the per-tool-value cache (tools of server runs
            that missed the per-server cache).
        server_cache_hits: Server runs answered whole from the per-server cache.
        server_cache_misses: Server runs that were looked up tool by tool.
    """

    tools_converted: int
    tool_cache_lookups: int
    server_cache_hits: int
    server_cache_misses: int


_counters = _Counters()


def statistics() -> _Statistics:
    """The conversion counters now (for tests and benchmarks: is the cache used?)."""
    return _Statistics(**attrs.asdict(_counters))


def _clear_caches() -> None:
    """Forget every cached conversion (for benchmarks measuring a cold start)."""
    _caches.clear()
    _server_caches.clear()


def _cache(profile: _Profile) -> dict[McpTool, _Converted]:
    cache = _caches.get(profile)
    if cache is None:
        cache = _caches[profile] = {}
    return cache


def _store(cache: dict[McpTool, _Converted], tool: McpTool, converted: _Converted) -> None:
    if len(cache) >= _CACHE_LIMIT:
        # Drop the oldest quarter (dicts keep insertion order): cheap, and a tool set
        # that is in use is re-inserted on its next call.
        for key in list(cache)[: _CACHE_LIMIT // 4]:
            del cache[key]
    cache[tool] = converted


def _store_server(key: _ServerKey, entry: _ServerEntry) -> None:
    if len(_server_caches) >= _SERVER_CACHE_LIMIT:
        for old in list(_server_caches)[: _SERVER_CACHE_LIMIT // 4]:
            del _server_caches[old]
    _server_caches[key] = entry


_Steps = Generator[None, None, tuple[list[Schema], list[ConversionNote]]]
"""A conversion as steps: it yields whenever :data:`_SLICE` seconds of work are used up."""


@attrs.define(eq=False)
class _Slicer:
    """Says when the current time slice is used up (and starts the next one)."""

    deadline: float = attrs.field(factory=lambda: time.perf_counter() + _SLICE)

    def due(self) -> bool:
        now = time.perf_counter()
        if now < self.deadline:
            return False
        self.deadline = now + _SLICE
        return True


def _steps(profile: _Profile, tools: list[McpTool]) -> _Steps:
    """The whole conversion of ``tools``, yielding at the end of each time slice.

    1. Split ``tools`` into runs of one server; a run whose tools are the very objects
       the per-server cache holds is answered from it. The ids of such a run were
       checked when it was stored (the objects are frozen); the other runs' ids are
       checked here, and uniqueness across the whole list.
    2. Fill the other runs from the per-tool cache or the converter, storing as it
       goes; a run is stored in the per-server cache once it is complete.
    3. Assemble the provider's list (fresh outer dicts).

    The sync converters drive it in one go; the async one checkpoints at every yield.
    An abandoned conversion keeps what it stored.
    """
    slicer = _Slicer()
    n = len(tools)
    results: list[_Converted | None] = [None] * n
    stale: list[tuple[_ServerKey, int, int]] = []
    seen_runs: dict[str, int] = {}
    start = 0
    while start < n:
        server_id = tools[start].server_id
        stop = start + 1
        while stop < n and tools[stop].server_id == server_id:
            stop += 1
        occurrence = seen_runs.get(server_id, 0)
        seen_runs[server_id] = occurrence + 1
        key = (profile, server_id, occurrence)
        entry = _server_caches.get(key)
        run = tools[start:stop]
        if entry is not None and len(entry.tools) == len(run) and all(map(operator.is_, entry.tools, run)):
            results[start:stop] = entry.results
            _counters.server_cache_hits += 1
        else:
            check_tool_ids(run)
            stale.append((key, start, stop))
            _counters.server_cache_misses += 1
        start = stop
        if slicer.due():
            yield
    if len({tool.id for tool in tools}) != n:
        check_tool_ids(tools)  # raises, naming the repeated id and both tools

    cache = _cache(profile)
    for key, start, stop in stale:
        for i in range(start, stop):
            tool = tools[i]
            _counters.tool_cache_lookups += 1
            converted = cache.get(tool)
            if converted is None:
                converted = _convert_tool(profile, tool)
                _counters.tools_converted += 1
                _store(cache, tool, converted)
            results[i] = converted
            if slicer.due():
                yield
        _store_server(key, _ServerEntry(tuple(tools[start:stop]), tuple(results[start:stop])))  # type: ignore[arg-type]

    # The cached definitions are shared: hand out fresh outer dicts so that a caller
    # adding a key (cache_control, strict) never edits the cache. Schemas stay shared.
    done: list[_Converted] = results  # type: ignore[assignment]  # every slot is filled
    notes: list[ConversionNote] = []
    definitions: list[Schema] = []
    chat = profile.provider == "openai" and profile.api == "chat"
    for begin in range(0, n, _ASSEMBLY_CHUNK):
        for definition, tool_notes in done[begin : begin + _ASSEMBLY_CHUNK]:
            if tool_notes:
                notes.extend(tool_notes)
            definitions.append({**definition, "function": dict(definition["function"])} if chat else dict(definition))
        if slicer.due():
            yield
    if profile.provider != "gemini":
        return definitions, notes
    if n > GEMINI_MAX_DECLARATIONS:
        notes.append(
            ConversionNote(
                tool_id=tools[GEMINI_MAX_DECLARATIONS].id,
                path="",
                action=NoteAction.LIMIT,
                detail=f"{n} function declarations; Gemini accepts at most {GEMINI_MAX_DECLARATIONS}",
            )
        )
    return ([{"functionDeclarations": definitions}] if definitions else []), notes


_Result = tuple[list[Schema], list[ConversionNote]]


def _run_sync(steps: _Steps) -> _Result:
    """Drive the steps in one go."""
    while True:
        try:
            next(steps)
        except StopIteration as finished:
            result: _Result = finished.value
            return result


async def _run_async(steps: _Steps) -> _Result:
    """Drive the steps with a checkpoint at every yield (and one at the end)."""
    while True:
        try:
            next(steps)
        except StopIteration as finished:
            result: _Result = finished.value
            break
        await trio.lowlevel.checkpoint()
    await trio.lowlevel.checkpoint()
    return result


def convert_tools_with_report(
    tools: Iterable[McpTool],
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
    return _run_sync(_steps(profile, list(tools)))


def convert_tools(
    tools: Iterable[McpTool],
    api_format: ApiFormat | str,
    *,
    strict: bool = False,
    api: OpenAIApi | str = "chat",
    json_schema: bool = False,
) -> list[Schema]:
    """Like :func:`convert_tools_with_report`, without the report."""
    return convert_tools_with_report(tools, api_format, strict=strict, api=api, json_schema=json_schema)[0]


async def convert_tools_async_with_report(
    tools: Iterable[McpTool],
    api_format: ApiFormat | str,
    *,
    strict: bool = False,
    api: OpenAIApi | str = "chat",
    json_schema: bool = False,
) -> tuple[list[Schema], list[ConversionNote]]:
    """Convert tools without stalling the event loop, with the report.

    The same conversion as :func:`convert_tools_with_report`, on the calling task, with
    a checkpoint every 2 ms of work: other tasks keep running even while tens of
    thousands of uncached tools are converted. A server whose tools are the very
    objects of an earlier call (as the registry hands them out while nothing changed)
    costs an identity comparison per tool.

    Cancellation: cancelling the call abandons the conversion at its next checkpoint;
    the tools converted so far stay cached (a retry does not redo them).

    Args and raises are those of :func:`convert_tools_with_report`.
    """
    profile = _profile(api_format, strict=strict, api=api, json_schema=json_schema)
    return await _run_async(_steps(profile, list(tools)))


async def convert_tools_async(
    tools: Iterable[McpTool],
    api_format: ApiFormat | str,
    *,
    strict: bool = False,
    api: OpenAIApi | str = "chat",
    json_schema: bool = False,
) -> list[Schema]:
    """Like :func:`convert_tools_async_with_report`, without the report."""
    result = await convert_tools_async_with_report(tools, api_format, strict=strict, api=api, json_schema=json_schema)
    return result[0]


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
    tools: Iterable[McpTool], *, strict: bool = False, api: OpenAIApi | str = "chat"
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
    tools: Iterable[McpTool], *, strict: bool = False, api: OpenAIApi | str = "chat"
) -> list[Schema]:
    """OpenAI tool definitions (see :func:`convert_mcp_tools_to_openai_with_report`)."""
    return convert_tools_with_report(tools, "openai", strict=strict, api=api)[0]


def convert_mcp_tools_to_anthropic_with_report(
    tools: Iterable[McpTool],
) -> tuple[list[Schema], list[ConversionNote]]:
    """Anthropic tool definitions (``{"name", "description", "input_schema"}``) and report.

    The input schema is the normalised JSON Schema: an object at the root with no
    ``anyOf``/``oneOf``/``allOf`` there, which Anthropic rejects.

    Raises:
        InvalidToolName: A tool id breaks the providers' name rule or is repeated.
    """
    return convert_tools_with_report(tools, "anthropic")


def convert_mcp_tools_to_anthropic(tools: Iterable[McpTool]) -> list[Schema]:
    """Anthropic tool definitions (see :func:`convert_mcp_tools_to_anthropic_with_report`)."""
    return convert_tools_with_report(tools, "anthropic")[0]


def convert_mcp_tools_to_gemini_with_report(
    tools: Iterable[McpTool], *, json_schema: bool = False
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


def convert_mcp_tools_to_gemini(tools: Iterable[McpTool], *, json_schema: bool = False) -> list[Schema]:
    """Gemini tools (see :func:`convert_mcp_tools_to_gemini_with_report`)."""
    return convert_tools_with_report(tools, "gemini", json_schema=json_schema)[0]
