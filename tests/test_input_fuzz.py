"""Every JSON value in every field of user input gives a record or a typed error.

One import entry with ``"url": 5`` made ``add_json`` raise an untyped ``AttributeError`` and
lose the good entries beside it. Here hypothesis puts every JSON type (null, booleans, huge and
small integers, floats with NaN and infinities, strings, lists, objects, nested) into every
field of a record, of a desktop-app entry and of a whole document, through the pure parsers
and through a real runtime's ``McpService.add`` / ``add_json`` / ``update``. Only
:class:`~mcp_actors.errors.McpActorsError` may escape, errors name the entry and the field, and
a good entry beside a bad one is always saved.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import trio
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from testkit import runtime_at

from mcp_actors._config.codec import record_from_json_dict, records_from_document
from mcp_actors._config.host_import import parse_server_configs, read_server_configs
from mcp_actors._config.record import McpServerRecord
from mcp_actors._config.store import ConfigStore
from mcp_actors.errors import ConfigError, InvalidServerConfig, McpActorsError

# ----------------------------------------------------------------------------- strategies

_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([0, -1, 2**63, 10**400, -(10**400)])
    | st.floats()  # NaN and infinities included: Python's json reads them
    | st.text(max_size=12)
    | st.sampled_from(["", " ", "stdio", "sse", "http", "https://example.com/mcp", "\x00", "a=b", "\r\n"])
)
json_values = st.recursive(
    _json_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=8,
)

_RECORD_KEYS = (
    "id",
    "name",
    "type",
    "scope",
    "config",
    "isActive",
    "isTrusted",
    "disabledTools",
    "disabledAutoApproveTools",
    "installSource",
    "projectPath",
    "createdAt",
    "updatedAt",
)
_CONFIG_KEYS = ("command", "args", "env", "cwd", "url", "headers", "connectTimeout", "callTimeout", "pingInterval")
_DESKTOP_KEYS = (
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "serverUrl",
    "httpUrl",
    "headers",
    "type",
    "transport",
    "transportType",
    "disabled",
    "autoApprove",
    "alwaysAllow",
    "trust",
    "disabledTools",
    "excludeTools",
    "timeout",
    "connectTimeout",
    "callTimeout",
    "pingInterval",
    "name",
    "envFile",
    "somethingElse",
)


def _stdio_record(name: str = "fuzzed") -> dict[str, Any]:
    return {
        "id": f"mcp_1_{name}",
        "name": name,
        "type": "stdio",
        "config": {"command": "npx", "args": ["-y", "pkg"], "env": {"A": "1"}},
        "createdAt": "2025-06-01T12:00:00Z",
    }


def _http_record(name: str = "fuzzed") -> dict[str, Any]:
    return {
        "id": f"mcp_1_{name}",
        "name": name,
        "type": "http",
        "config": {"url": "https://example.com/mcp", "headers": {"X-Key": "v"}},
        "createdAt": "2025-06-01T12:00:00Z",
    }


@st.composite
def fuzzed_records(draw: st.DrawFn) -> dict[str, Any]:
    """A valid record JSON with one field (top level, in config, or nested) replaced by any JSON value."""
    record = draw(st.sampled_from([_stdio_record, _http_record]))()
    value = draw(json_values)
    where = draw(st.sampled_from(["record", "config", "env", "headers", "args", "missing"]))
    if where == "record":
        record[draw(st.sampled_from(_RECORD_KEYS))] = value
    elif where == "config":
        record["config"][draw(st.sampled_from(_CONFIG_KEYS))] = value
    elif where in ("env", "headers"):
        record["config"].setdefault(where, {})[draw(st.text(max_size=6))] = value
    elif where == "args":
        record["config"]["args"] = [*record["config"].get("args", []), value]
    else:
        record.pop(draw(st.sampled_from(_RECORD_KEYS)), None)
    return record


@st.composite
def fuzzed_desktop_entries(draw: st.DrawFn) -> Any:
    """A desktop-app entry (``{command...}`` or ``{url...}``) with one key set to any JSON value, or any value."""
    if draw(st.integers(0, 9)) == 0:
        return draw(json_values)
    entry: dict[str, Any] = draw(st.sampled_from([{"command": "npx", "args": ["-y", "pkg"]}, {"url": "https://h/mcp"}]))
    entry = json.loads(json.dumps(entry))
    for _ in range(draw(st.integers(1, 2))):
        key = draw(st.sampled_from(_DESKTOP_KEYS))
        value = draw(json_values)
        if key in ("env", "headers") and draw(st.booleans()):
            value = {draw(st.text(max_size=6)): value}
        entry[key] = value
    return entry


_GOOD_ENTRY = {"command": "npx", "args": ["-y", "good-server"], "env": {"TOKEN": "t"}}


def _check_error(error: BaseException, *, name: str | None = None) -> None:
    """A typed config error that says what to do (and names the entry when it has a name)."""
    assert isinstance(error, ConfigError), repr(error)
    message = str(error)
    assert message and message == message.strip()
    if name is not None and name.strip():
        assert repr(name) in message or name in message, (name, message)


def _dumps(value: Any) -> str:
    return json.dumps(value, allow_nan=True)


# ----------------------------------------------------------------------------- pure parsers


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fuzzed_records())
def test_record_from_json_dict_is_total(data: dict[str, Any]) -> None:
    """Any JSON value in any record field gives a record or an InvalidServerConfig naming the server and field."""
    try:
        record = record_from_json_dict(data)
    except InvalidServerConfig as exc:
        _check_error(exc, name=data.get("name") if isinstance(data.get("name"), str) else None)
        assert exc.field, str(exc)
        assert "fix" in str(exc) or "give" in str(exc) or "upgrade" in str(exc), str(exc)
    else:
        assert isinstance(record, McpServerRecord)
        # A record that parsed is one the store can write: finite numbers, JSON-encodable.
        assert math.isfinite(record.config.call_timeout)
        json.dumps(records_from_document({"mcpServers": [data]})[0].config.args, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_record_from_json_dict_accepts_any_json_value_as_the_entry(value: Any) -> None:
    """A whole entry that is any JSON value is a record or an InvalidServerConfig, never another error."""
    try:
        record_from_json_dict(value)
    except InvalidServerConfig as exc:
        _check_error(exc)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["version", "mcpServers", "other"]), json_values, max_size=3))
def test_records_from_document_is_total(document: dict[str, Any]) -> None:
    """Any document shape gives records or a ConfigError (the store reports it as corrupt, never crashes)."""
    try:
        records_from_document(document)
    except ConfigError as exc:
        _check_error(exc)


@settings(max_examples=400, deadline=None)
@given(st.lists(fuzzed_desktop_entries(), min_size=1, max_size=3), st.sampled_from(["mcpServers", "servers", ""]))
def test_desktop_import_is_total_and_keeps_good_entries(bad: list[Any], container: str) -> None:
    """Fuzzed desktop entries beside a good one: each gets a record or a typed error; the good one imports."""
    servers = {f"bad{i}": entry for i, entry in enumerate(bad)}
    servers["good"] = _GOOD_ENTRY
    document = {container: servers} if container else servers
    report = parse_server_configs(_dumps(document))
    assert [entry.name for entry in report.entries] == list(servers)
    for entry in report.entries:
        assert (entry.record is None) != (entry.error is None), entry
        if entry.error is not None:
            _check_error(entry.error, name=entry.name)
            assert entry.error.server == entry.name
            if isinstance(servers[entry.name], dict):
                assert entry.error.field, str(entry.error)  # an object entry: the bad field is named
    good = report.entries[-1]
    assert good.record is not None and good.record.name == "good"
    assert dict(good.record.config.env) == {"TOKEN": "t"}


@settings(max_examples=300, deadline=None)
@given(st.lists(fuzzed_records(), min_size=1, max_size=3))
def test_records_import_is_total_and_keeps_good_entries(bad: list[dict[str, Any]]) -> None:
    """Our own list form with fuzzed records beside a good one: typed per-entry errors, the good one kept."""
    good = _stdio_record("good")
    report = parse_server_configs(_dumps({"mcpServers": [*bad, good]}))
    assert len(report.entries) == len(bad) + 1
    for entry in report.entries:
        assert (entry.record is None) != (entry.error is None), entry
        if entry.error is not None:
            _check_error(entry.error)
    assert report.entries[-1].record is not None and report.entries[-1].record.name == "good"


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        json_values,
        st.dictionaries(st.sampled_from(["mcpServers", "servers", "mcp", "inputs", "version", "x"]), json_values),
        st.builds(lambda v: {"mcp": {"servers": v}}, json_values),
        st.builds(lambda v: {"mcpServers": [v]}, json_values),
        st.builds(lambda v: {"mcpServers": [], "version": v}, json_values),
    )
)
def test_any_document_imports_or_is_a_config_error(document: Any) -> None:
    """Any JSON document gives a report or a ConfigError (never AttributeError, TypeError, OverflowError)."""
    try:
        report = read_server_configs(document)
    except ConfigError as exc:
        _check_error(exc)
    else:
        for entry in report.entries:
            assert (entry.record is None) != (entry.error is None)
            if entry.error is not None:
                _check_error(entry.error)
    try:
        parse_server_configs(_dumps(document))
    except ConfigError as exc:
        _check_error(exc)


def test_the_issue_example_url_5_is_an_error_for_that_entry_only() -> None:
    """The issue's input: ``"url": 5`` is a typed error naming the entry and url; the good entry imports."""
    report = parse_server_configs(_dumps({"mcpServers": {"bad": {"url": 5}, "good": _GOOD_ENTRY}}))
    bad, good = report.entries
    assert isinstance(bad.error, InvalidServerConfig)
    assert bad.error.server == "bad" and bad.error.field == "url"
    assert "url must be a string (an http:// or https:// URL), got a number; fix the entry" in str(bad.error)
    assert good.record is not None


def test_numbers_and_nesting_the_decoder_refuses_are_config_errors(tmp_path: Path) -> None:
    """A 5,000-digit integer or 100,000 nested lists: ConfigError (import), ConfigFileCorrupt (store)."""
    from mcp_actors.errors import ConfigFileCorrupt

    huge = '{"a": {"command": "npx", "timeout": ' + "9" * 5000 + "}}"
    deep = '{"a": {"command": "npx", "args": ' + "[" * 100_000 + "]" * 100_000 + "}}"
    for text, problem in ((huge, "number too long"), (deep, "too deeply")):
        try:
            parse_server_configs(text)
        except ConfigError as exc:
            assert problem in str(exc) and "fix the JSON" in str(exc)
        else:
            raise AssertionError("accepted")
        path = tmp_path / "mcp-config.json"
        path.write_text(text)
        try:
            ConfigStore(path).load()
        except ConfigFileCorrupt as exc:
            assert problem in str(exc) and str(path) in str(exc)
        else:
            raise AssertionError("accepted")


def test_deep_but_decodable_nesting_in_an_entry_is_a_typed_error() -> None:
    """Lists nested 900 deep in args (decodable) give a typed error for that entry, not a RecursionError."""
    args = "[" * 900 + "]" * 900
    report = parse_server_configs('{"deep": {"command": "npx", "args": ' + args + '}, "good": {"command": "npx"}}')
    deep, good = report.entries
    assert isinstance(deep.error, InvalidServerConfig) and deep.error.field == "config.args[0]"
    assert good.record is not None


# ----------------------------------------------------------------------------- through a real runtime


def _run(tmp_path: Path, body: Any) -> Any:
    async def main() -> Any:
        async with runtime_at(tmp_path, sweep_ledger=False, connect_on_add=False) as rt:
            return await body(rt)

    return trio.run(main)


_fuzz_counter = iter(range(10**9))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(fuzzed_desktop_entries(), min_size=1, max_size=4),
    st.lists(json_values, min_size=1, max_size=4),
    st.lists(fuzzed_records(), max_size=3),
)
@example(bad=[{"url": 5}], raw_inputs=[5], records=[])  # the issue's input
@example(bad=[{"url": [1]}, {"command": "npx", "timeout": 10**400}], raw_inputs=[{"url": {}}], records=[])
def test_service_add_json_and_add_raise_only_typed_errors_and_keep_good_entries(
    tmp_path: Path, bad: list[Any], raw_inputs: list[Any], records: list[dict[str, Any]]
) -> None:
    """Through a real runtime: add_json keeps the good entry beside fuzzed ones; add() raises only McpActorsError."""
    run_dir = tmp_path / f"run{next(_fuzz_counter)}"
    run_dir.mkdir()

    async def body(rt: Any) -> None:
        svc = rt.service
        servers = {f"bad{i}": entry for i, entry in enumerate(bad)}
        servers["good"] = _GOOD_ENTRY
        results = await svc.add_json(_dumps({"mcpServers": servers}))
        assert [result.name for result in results] == list(servers)
        assert results[-1].ok
        for result in results:
            if result.error is not None:
                assert isinstance(result.error, McpActorsError)
        candidates: list[Any] = [{key: v for key, v in record.items() if key != "id"} for record in records]
        for value in [*raw_inputs, *bad]:
            candidates += [value, {"name": "x", "type": "stdio", "config": value}]
        for candidate in candidates:
            try:
                await svc.add(candidate)
            except McpActorsError:
                pass
        return {record.name for record in await _maybe_await(svc.list())}

    listed = _run(run_dir, body)
    # What the runtime saved is what it listed, and a fresh reader accepts it all.
    saved = {record.name for record in ConfigStore(run_dir / "cfg.json").load()}
    assert "good" in listed
    assert saved == listed


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "name",
                    "type",
                    "config",
                    "is_active",
                    "is_trusted",
                    "disabled_tools",
                    "disabled_auto_approve_tools",
                    "scope",
                    "project_path",
                    "install_source",
                    "isActive",
                    "disabledTools",
                    "id",
                    "created_at",
                    "unknown",
                ]
            ),
            json_values,
        ),
        min_size=1,
        max_size=6,
    )
)
def test_service_update_raises_only_typed_errors(tmp_path: Path, changes: list[tuple[str, Any]]) -> None:
    """Through a real runtime: update() with any JSON value in any field raises only McpActorsError."""
    run_dir = tmp_path / f"run{next(_fuzz_counter)}"
    run_dir.mkdir()

    async def body(rt: Any) -> None:
        svc = rt.service
        record = await svc.add({"name": "target", "type": "stdio", "config": {"command": "npx"}})
        for field, value in changes:
            try:
                await svc.update(record.id, **{field: value})
            except McpActorsError:
                pass

    _run(run_dir, body)
    # Whatever was accepted was saved in a form a fresh reader accepts: the demo and the target, one id each.
    saved = ConfigStore(run_dir / "cfg.json").load()
    assert len(saved) == 2 and saved[1].id.startswith("mcp_")


async def _maybe_await(value: Any) -> Any:
    if hasattr(value, "__await__"):
        return await value
    return value
