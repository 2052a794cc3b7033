"""Workloads: a weighted mix of MCP operations, read from a TOML or JSON scenario file.

A scenario file::

    # scenario.toml
    [[operations]]
    tool = "echo"                       # kind defaults to "tools/call"
    weight = 3
    arguments = { text = { "$random_string" = 32 } }
    expect = { is_error = false, text_contains = "" }

    [[operations]]
    kind = "tools/list"
    weight = 1

Argument templates (any value of ``arguments`` may be one, at any depth):

* ``{"$seq": {"start": 0, "step": 1}}`` — a number that grows with every call of the run
  (unique across workers);
* ``{"$choice": [a, b, ...]}`` — one of the values, at random;
* ``{"$random_int": [low, high]}`` — an integer in the closed range;
* ``{"$random_string": N}`` — ``N`` random letters and digits;
* ``{"$file": "values.txt"}`` — the file's lines in turn (a line that is JSON is decoded);
  the path is relative to the scenario file.

Validation is complete before anything starts: every problem is reported with its path
(``operations[1].arguments.text``) and what is expected.
"""

from __future__ import annotations

import enum
import json
import random
import string
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from mcp_actors.errors import StressConfigInvalid
from mcp_actors.stress._parse import parse_duration

__all__ = ["Expectation", "OpKind", "Operation", "Scenario", "load_scenario", "scenario_from_dict", "single_tool"]


class OpKind(enum.StrEnum):
    """The MCP operations a scenario can send."""

    CALL = "tools/call"
    LIST = "tools/list"
    READ_RESOURCE = "resources/read"
    GET_PROMPT = "prompts/get"
    PING = "ping"


# The McpService method each operation needs beyond the always-present call/list.
SERVICE_METHOD = {OpKind.READ_RESOURCE: "read_resource", OpKind.GET_PROMPT: "get_prompt", OpKind.PING: "health"}


@attrs.frozen(kw_only=True)
class Expectation:
    """What a result must look like to count as a success (else it is an ``expectation`` failure).

    Attributes:
        is_error: The expected ``isError`` of a tool result (``None``: either).
        text_contains: A substring the result's text must contain.
    """

    is_error: bool | None = False
    text_contains: str | None = None


@attrs.frozen(kw_only=True)
class Operation:
    """One entry of the mix.

    Attributes:
        name: How reports name it (default: the tool name, else the kind).
        kind: The MCP operation.
        weight: Relative share of the mix (> 0).
        tool: ``tools/call``: the tool.
        arguments: ``tools/call`` arguments / ``prompts/get`` arguments, with templates.
        uri: ``resources/read``: the resource URI.
        prompt: ``prompts/get``: the prompt name.
        timeout: Seconds a call may take (``None``: the run's ``--timeout``).
        expect: Per-operation expectations.
    """

    name: str
    kind: OpKind
    weight: float = 1.0
    tool: str | None = None
    arguments: Mapping[str, Any] = attrs.field(factory=dict)
    uri: str | None = None
    prompt: str | None = None
    timeout: float | None = None
    expect: Expectation = Expectation()


@attrs.frozen(kw_only=True)
class Scenario:
    """A validated weighted mix of operations."""

    operations: tuple[Operation, ...]

    def check_supported(self, service_type: type) -> None:
        """Fail with a clear error when an operation needs a method the service lacks.

        Raises:
            StressConfigInvalid: An operation is not supported by this mcp-actors version.
        """
        for i, op in enumerate(self.operations):
            method = SERVICE_METHOD.get(op.kind)
            if method is not None and not callable(getattr(service_type, method, None)):
                raise StressConfigInvalid(
                    f"operations[{i}]: {op.kind.value} is not supported by this version of mcp-actors "
                    f"(McpService has no {method}()); remove the operation or upgrade",
                    field=f"operations[{i}].kind",
                )


def single_tool(tool: str, arguments: Mapping[str, Any] | None = None) -> Scenario:
    """The scenario of ``--tool NAME --args JSON``: one ``tools/call``, isError false expected."""
    return scenario_from_dict({"operations": [{"tool": tool, "arguments": dict(arguments or {})}]}, origin="--tool")


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a TOML (``.toml``) or JSON scenario file.

    Raises:
        StressConfigInvalid: The file is unreadable, not TOML/JSON, or a field is invalid
            (the message names the file and the field's path).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise StressConfigInvalid(
            f"scenario {str(path)!r}: cannot read it ({exc.strerror}); check the path", field="--scenario"
        ) from None
    try:
        data = tomllib.loads(text) if path.suffix.lower() == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        kind = "TOML" if path.suffix.lower() == ".toml" else "JSON"
        raise StressConfigInvalid(
            f"scenario {str(path)!r} is not valid {kind}: {exc}; fix the file", field="--scenario"
        ) from None
    return scenario_from_dict(data, origin=str(path), base_dir=path.parent)


_OP_KEYS = {"name", "kind", "weight", "tool", "arguments", "uri", "prompt", "timeout", "expect"}
_NEEDS = {
    OpKind.CALL: ("tool",),
    OpKind.LIST: (),
    OpKind.READ_RESOURCE: ("uri",),
    OpKind.GET_PROMPT: ("prompt",),
    OpKind.PING: (),
}


def scenario_from_dict(data: Any, *, origin: str = "scenario", base_dir: Path | None = None) -> Scenario:
    """Validate a decoded scenario document (``{"operations": [...]}``).

    Args:
        data: The decoded document.
        origin: Names the source in error messages (a path, or ``--tool``).
        base_dir: Where ``$file`` paths are relative to (default: the working directory).

    Raises:
        StressConfigInvalid: The first invalid field, by path, with what is expected.
    """

    def fail(where: str, problem: str) -> StressConfigInvalid:
        return StressConfigInvalid(f"{origin}: {where}: {problem}", field=where)

    if not isinstance(data, Mapping):
        raise fail("(top)", "expected a table/object with an 'operations' list")
    unknown = sorted(set(data) - {"operations"})
    if unknown:
        raise fail(unknown[0], "unknown key; a scenario has only 'operations'")
    ops = data.get("operations")
    if not isinstance(ops, list) or not ops:
        raise fail("operations", "expected a non-empty list of operations ([[operations]] in TOML)")
    found: list[Operation] = []
    for i, raw in enumerate(ops):
        where = f"operations[{i}]"
        if not isinstance(raw, Mapping):
            raise fail(where, f"expected a table/object, got {type(raw).__name__}")
        bad = sorted(set(raw) - _OP_KEYS)
        if bad:
            raise fail(f"{where}.{bad[0]}", f"unknown key; expected one of {', '.join(sorted(_OP_KEYS))}")
        try:
            kind = OpKind(raw.get("kind", "tools/call"))
        except ValueError:
            choices = ", ".join(k.value for k in OpKind)
            raise fail(f"{where}.kind", f"expected one of {choices}, got {raw.get('kind')!r}") from None
        for key in _NEEDS[kind]:
            if not isinstance(raw.get(key), str) or not raw[key]:
                raise fail(f"{where}.{key}", f"{kind.value} needs a non-empty string {key!r}")
        for key in ("tool", "uri", "prompt"):
            if key in raw and key not in _NEEDS[kind]:
                raise fail(f"{where}.{key}", f"not used by {kind.value}; remove it")
        weight = raw.get("weight", 1)
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not weight > 0:
            raise fail(f"{where}.weight", f"expected a number > 0, got {weight!r}")
        arguments = raw.get("arguments", {})
        if not isinstance(arguments, Mapping):
            raise fail(f"{where}.arguments", f"expected a table/object, got {type(arguments).__name__}")
        if arguments and kind not in (OpKind.CALL, OpKind.GET_PROMPT):
            raise fail(f"{where}.arguments", f"not used by {kind.value}; remove it")
        compiled = {k: _compile(v, f"{where}.arguments.{k}", fail, base_dir) for k, v in arguments.items()}
        timeout = raw.get("timeout")
        if timeout is not None:
            try:
                timeout = parse_duration(timeout, field=f"{where}.timeout", allow_zero=False)
            except StressConfigInvalid as exc:
                raise fail(f"{where}.timeout", str(exc).split(": ", 1)[1]) from None
        expect = _expectation(raw.get("expect", {}), f"{where}.expect", fail, kind)
        name = raw.get("name") or raw.get("tool") or raw.get("prompt") or kind.value
        if not isinstance(name, str):
            raise fail(f"{where}.name", f"expected a string, got {name!r}")
        found.append(
            Operation(
                name=name,
                kind=kind,
                weight=float(weight),
                tool=raw.get("tool"),
                arguments=compiled,
                uri=raw.get("uri"),
                prompt=raw.get("prompt"),
                timeout=timeout,
                expect=expect,
            )
        )
    names = [op.name for op in found]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise fail(f"operations[{i}].name", f"{name!r} is used twice; give each operation its own name")
    return Scenario(operations=tuple(found))


def _expectation(raw: Any, where: str, fail: Any, kind: OpKind) -> Expectation:
    if not isinstance(raw, Mapping):
        raise fail(where, f"expected a table/object, got {type(raw).__name__}")
    bad = sorted(set(raw) - {"is_error", "text_contains"})
    if bad:
        raise fail(f"{where}.{bad[0]}", "unknown key; expected is_error or text_contains")
    is_error = raw.get("is_error", False if kind == OpKind.CALL else None)
    if is_error is not None and not isinstance(is_error, bool):
        raise fail(f"{where}.is_error", f"expected true or false, got {is_error!r}")
    contains = raw.get("text_contains")
    if contains is not None and not isinstance(contains, str):
        raise fail(f"{where}.text_contains", f"expected a string, got {contains!r}")
    return Expectation(is_error=is_error, text_contains=contains)


# ----------------------------------------------------------------------------- templates


@attrs.frozen(kw_only=True)
class _Seq:
    start: int
    step: int


@attrs.frozen(kw_only=True)
class _Choice:
    values: tuple[Any, ...]


@attrs.frozen(kw_only=True)
class _RandomInt:
    low: int
    high: int


@attrs.frozen(kw_only=True)
class _RandomString:
    size: int


@attrs.frozen(kw_only=True)
class _FileValues:
    values: tuple[Any, ...]


_TEMPLATES = ("$seq", "$choice", "$random_int", "$random_string", "$file")


def _compile(value: Any, where: str, fail: Any, base_dir: Path | None) -> Any:
    if isinstance(value, Mapping):
        marks = [k for k in value if isinstance(k, str) and k.startswith("$")]
        if not marks:
            return {k: _compile(v, f"{where}.{k}", fail, base_dir) for k, v in value.items()}
        if len(value) != 1 or marks[0] not in _TEMPLATES:
            raise fail(where, f"a template is one key of {', '.join(_TEMPLATES)}, got {sorted(value)}")
        mark, arg = marks[0], value[marks[0]]
        return _template(mark, arg, where, fail, base_dir)
    if isinstance(value, list):
        return [_compile(v, f"{where}[{i}]", fail, base_dir) for i, v in enumerate(value)]
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _template(mark: str, arg: Any, where: str, fail: Any, base_dir: Path | None) -> Any:
    match mark:
        case "$seq":
            arg = {} if arg in (None, True) else arg
            if not isinstance(arg, Mapping) or set(arg) - {"start", "step"}:
                raise fail(where, "$seq expects {start = N, step = N} (both optional)")
            start, step = arg.get("start", 0), arg.get("step", 1)
            if not (_is_int(start) and _is_int(step)):
                raise fail(where, f"$seq start and step must be integers, got {start!r} and {step!r}")
            return _Seq(start=start, step=step)
        case "$choice":
            if not isinstance(arg, list) or not arg:
                raise fail(where, f"$choice expects a non-empty list, got {arg!r}")
            return _Choice(values=tuple(arg))
        case "$random_int":
            if not (isinstance(arg, list) and len(arg) == 2 and all(map(_is_int, arg)) and arg[0] <= arg[1]):
                raise fail(where, f"$random_int expects [low, high] integers with low <= high, got {arg!r}")
            return _RandomInt(low=arg[0], high=arg[1])
        case "$random_string":
            if not _is_int(arg) or not 0 <= arg <= 64 * 1024 * 1024:
                raise fail(where, f"$random_string expects a size in characters (0..67108864), got {arg!r}")
            return _RandomString(size=arg)
        case "$file":
            if not isinstance(arg, str) or not arg:
                raise fail(where, f"$file expects a path, got {arg!r}")
            path = Path(arg) if base_dir is None or Path(arg).is_absolute() else base_dir / arg
            try:
                lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            except OSError as exc:
                raise fail(where, f"$file {str(path)!r}: cannot read it ({exc.strerror})") from None
            if not lines:
                raise fail(where, f"$file {str(path)!r} has no values (one per line)")
            return _FileValues(values=tuple(_json_or_text(line) for line in lines))
        case _:  # pragma: no cover - _TEMPLATES is checked first
            raise TypeError(f"unknown template {mark!r}")


def _json_or_text(line: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return line


_ALPHABET = string.ascii_letters + string.digits


def render(value: Any, n: int, rng: random.Random) -> Any:
    """The concrete value of a compiled template for call ``n`` of the run."""
    match value:
        case _Seq():
            return value.start + value.step * n
        case _Choice():
            return rng.choice(value.values)
        case _RandomInt():
            return rng.randint(value.low, value.high)
        case _RandomString():
            return "".join(rng.choices(_ALPHABET, k=value.size))
        case _FileValues():
            return value.values[n % len(value.values)]
        case Mapping():
            return {k: render(v, n, rng) for k, v in value.items()}
        case list():
            return [render(v, n, rng) for v in value]
        case _:
            return value


def pick(operations: Sequence[Operation], rng: random.Random) -> Operation:
    """One operation of the mix, with probability proportional to its weight."""
    if len(operations) == 1:
        return operations[0]
    return rng.choices(operations, weights=[op.weight for op in operations])[0]
