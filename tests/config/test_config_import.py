"""Import of desktop-app and IDE MCP configs: realistic samples, shapes, spellings, and errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcp_actors._config import host_import as import_module
from mcp_actors._config.host_import import AddJsonEntryResult, ImportFormat, ImportReport, parse_server_configs
from mcp_actors._config.record import InstallSource, McpServerRecord, ServerType
from mcp_actors.errors import ConfigError, InvalidServerConfig

SAMPLES = Path(__file__).parent.parent / "data" / "configs"


def _sample(name: str) -> ImportReport:
    return parse_server_configs((SAMPLES / name).read_text("utf-8"))


def _by_name(report: ImportReport) -> dict[str, AddJsonEntryResult]:
    return {entry.name: entry for entry in report.entries}


def _record(entry: AddJsonEntryResult) -> McpServerRecord:
    assert entry.record is not None, entry.error
    assert entry.error is None
    return entry.record


def _one(config: dict[str, Any]) -> AddJsonEntryResult:
    (entry,) = parse_server_configs(json.dumps({"mcpServers": {"s": config}})).entries
    return entry


# ----------------------------------------------------------------------------- the samples


def test_claude_desktop_config() -> None:
    """Claude Desktop: four stdio servers; env kept; globalShortcut reported as ignored."""
    report = _sample("claude_desktop_config.json")
    assert report.format is ImportFormat.MCP_SERVERS
    assert report.ignored_keys == ("globalShortcut",)
    entries = _by_name(report)
    assert list(entries) == ["filesystem", "github", "sqlite", "brave-search"]
    github = _record(entries["github"])
    assert github.type is ServerType.STDIO
    assert github.config.command == "npx"
    assert github.config.args == ("-y", "@modelcontextprotocol/server-github")
    assert github.config.env["GITHUB_PERSONAL_ACCESS_TOKEN"].startswith("ghp_FAKE")
    assert github.install_source is InstallSource.MANUAL
    assert (github.is_active, github.is_trusted) == (True, False)
    assert _record(entries["sqlite"]).config.command == "uvx"
    assert all(entry.unknown_keys == () and entry.notes == () for entry in report.entries)


def test_cursor_config() -> None:
    """Cursor: type inferred from url (/sse → sse, else http); envFile kept; an unresolvable placeholder noted."""
    entries = _by_name(_sample("cursor_mcp.json"))
    linear = _record(entries["linear"])
    assert linear.type is ServerType.SSE
    assert any("inferred 'sse'" in note for note in entries["linear"].notes)
    api = _record(entries["internal-api"])
    assert api.type is ServerType.HTTP
    assert api.config.url == "https://mcp.internal.example.com/mcp"
    assert list(api.config.headers) == ["Authorization"]
    postgres = entries["postgres"]
    assert _record(postgres).config.env == {"PGPASSWORD": "${env:PGPASSWORD}"}
    assert _record(postgres).config.env_file == "${workspaceFolder}/.env"
    # ${env:PGPASSWORD} is expanded at start; ${workspaceFolder} is known only at import (from a file).
    assert not any("env.PGPASSWORD" in note for note in postgres.notes)
    assert any("${workspaceFolder} in envFile" in note and "unresolved" in note for note in postgres.notes)
    assert _record(entries["puppeteer"]).config.args[-1] == "mcp/puppeteer"


def test_vscode_config_with_comments_trailing_commas_and_inputs() -> None:
    """VS Code: JSONC accepted, `servers` read, unanswered `inputs` reported, types honoured."""
    report = _sample("vscode_mcp.json")
    assert report.format is ImportFormat.VSCODE
    assert report.ignored_keys == ("inputs",)
    assert any("JSONC" in note for note in report.notes)
    assert any("inputs (perplexity-key) are asked for only when importing on a terminal" in n for n in report.notes)
    entries = _by_name(report)
    assert [e.ok for e in report.entries] == [True, True, True, True]
    assert _record(entries["Perplexity"]).config.env == {"PERPLEXITY_API_KEY": "${input:perplexity-key}"}
    assert any("env.PERPLEXITY_API_KEY" in note for note in entries["Perplexity"].notes)
    assert _record(entries["github"]).type is ServerType.HTTP
    assert _record(entries["github"]).config.url == "https://api.githubcopilot.com/mcp/"
    legacy = _record(entries["legacy-sse"])
    assert legacy.type is ServerType.SSE
    assert legacy.config.headers == {"X-Api-Key": "FAKE-vscode-header-000000"}
    assert _record(entries["fetch"]).config.args == ("mcp-server-fetch",)


def test_windsurf_config() -> None:
    """Windsurf: serverUrl is the URL; disabled servers import as inactive."""
    entries = _by_name(_sample("windsurf_mcp_config.json"))
    figma = _record(entries["figma"])
    assert (figma.type, figma.config.url) == (ServerType.HTTP, "https://mcp.figma.example.com/mcp")
    assert any("from serverUrl" in note for note in entries["figma"].notes)
    assert _record(entries["memory"]).is_active is False
    assert _record(entries["github"]).is_active is True


def test_cline_config() -> None:
    """Cline: timeout in seconds, autoApprove noted (not applied), transportType and streamableHttp read."""
    entries = _by_name(_sample("cline_mcp_settings.json"))
    weather = entries["weather"]
    assert _record(weather).config.call_timeout == 60.0
    assert _record(weather).is_trusted is False
    assert any("autoApprove lists 2 tools (get_forecast, get_current_weather)" in n for n in weather.notes)
    remote = _record(entries["remote-docs"])
    assert (remote.type, remote.config.call_timeout) == (ServerType.HTTP, 300.0)
    assert entries["remote-docs"].notes == ()  # an empty autoApprove needs no note
    old = _record(entries["old-sse"])
    assert (old.type, old.is_active) == (ServerType.SSE, False)


def test_roo_config() -> None:
    """Roo Code: streamable-http, alwaysAllow noted, disabledTools kept, watchPaths noted, env number stringified."""
    entries = _by_name(_sample("roo_mcp_settings.json"))
    assert _record(entries["context7"]).type is ServerType.HTTP
    assert any(note.startswith("alwaysAllow lists 1 tool ") for note in entries["context7"].notes)
    local = entries["local-dev"]
    record = _record(local)
    assert record.disabled_tools == ("dangerous_delete",)
    assert record.config.cwd == "/home/bob/projects/my-server"
    assert record.config.env == {"DEBUG": "1", "PORT": "3000"}
    assert record.config.call_timeout == 120.0
    assert any("watchPaths" in note for note in local.notes)
    assert any("env.PORT was a number" in note for note in local.notes)


def test_gemini_cli_config() -> None:
    """Gemini CLI: millisecond timeouts, trust, excludeTools and httpUrl are understood."""
    report = _sample("gemini_settings.json")
    assert report.ignored_keys == ("theme",)
    entries = _by_name(report)
    tools = _record(entries["pythonTools"])
    assert tools.config.call_timeout == 15.0
    assert tools.is_trusted is True
    assert tools.disabled_tools == ("drop_table",)
    assert any("read as milliseconds" in note for note in entries["pythonTools"].notes)
    assert any("$VAR in env.DATABASE_URL was read as ${VAR}" in note for note in entries["pythonTools"].notes)
    assert tools.config.env == {"DATABASE_URL": "${DB_CONNECTION_STRING}"}
    http = _record(entries["httpServer"])
    assert (http.type, http.config.url, http.config.call_timeout) == (ServerType.HTTP, "http://localhost:3000/mcp", 5.0)


def test_claude_code_config() -> None:
    """Claude Code's .mcp.json: explicit http, sse and stdio types."""
    entries = _by_name(_sample("claude_code_mcp.json"))
    types = {name: _record(entry).type for name, entry in entries.items()}
    assert types == {"sentry": ServerType.HTTP, "asana": ServerType.SSE, "airtable": ServerType.STDIO}


def test_good_entries_survive_bad_ones_and_each_error_names_server_and_field() -> None:
    """In a mixed file the good servers import; every bad one has an error with its name and field."""
    report = _sample("mixed_good_and_bad.json")
    entries = _by_name(report)
    assert [record.name for record in report.records] == ["good", "also-good"]
    expected = {
        "no-transport": ("command", "command or url is required"),
        "both": ("type", "has both command and url"),
        "bad-args": ("config.args", "must be a list of strings"),
        "bad-url": ("config.url", "http:// or https://"),
        "bad-timeout": ("timeout", "must be a number"),
        "not-an-object": (None, "must be an object"),
    }
    assert {error.server for error in report.errors} == set(expected)
    for name, (field, text) in expected.items():
        error = entries[name].error
        assert isinstance(error, InvalidServerConfig)
        assert error.server == name and error.field == field
        assert f"server {name!r}" in str(error) and text in str(error)
        assert entries[name].record is None
    assert entries["also-good"].unknown_keys == ("description",)


def test_our_own_records_list_form() -> None:
    """Our export form: ids and timestamps kept, unknown keys reported and dropped, bad entries isolated."""
    report = _sample("mcp_actors_export.json")
    assert report.format is ImportFormat.RECORDS
    entries = _by_name(report)
    time_server = _record(entries["time"])
    assert time_server.id == "mcp_1717000000000_k3j9x0a1b"
    assert time_server.disabled_auto_approve_tools == ("convert_time",)
    assert time_server.config.call_timeout == 30.0
    assert time_server.updated_at.isoformat() == "2024-06-01T08:00:00+00:00"
    docs = entries["docs"]
    assert docs.unknown_keys == ("isActve", "config.retries")
    assert _record(docs).is_active is True  # the misspelt key was not applied
    assert _record(docs).id.startswith("mcp_")
    assert any("new one was assigned" in note for note in docs.notes)
    broken = entries["broken"].error
    assert broken is not None and (broken.server, broken.field) == ("broken", "config.url")


@pytest.mark.parametrize("sample", sorted(path.name for path in SAMPLES.glob("*.json")))
def test_no_secret_from_a_sample_appears_in_reports(sample: str) -> None:
    """The fake tokens in the samples never show in reprs, notes or error messages."""
    report = _sample(sample)
    shown = [repr(report), *report.notes]
    for entry in report.entries:
        shown += [*entry.notes, str(entry.error), repr(entry.record)]
    assert all("FAKE" not in text for text in shown)


# ----------------------------------------------------------------------------- shapes


def test_bare_name_to_config_map() -> None:
    """A bare {name: config} object is a set of servers."""
    report = parse_server_configs('{"time": {"command": "uvx", "args": ["mcp-server-time"]}}')
    assert report.format is ImportFormat.BARE
    assert [r.name for r in report.records] == ["time"]


def test_vscode_settings_json_nesting() -> None:
    """VS Code's settings.json form {"mcp": {"servers": ...}} is read; other settings are reported."""
    text = '{"editor.fontSize": 14, "mcp": {"servers": {"f": {"command": "uvx"}}, "inputs": [{"id": "k"}]}}'
    report = parse_server_configs(text)
    assert report.format is ImportFormat.VSCODE
    assert [r.name for r in report.records] == ["f"]
    assert report.ignored_keys == ("editor.fontSize", "mcp.inputs")


def test_one_unnamed_server_gets_a_helpful_error() -> None:
    """A single server config without a name is a ConfigError that says how to wrap it."""
    with pytest.raises(ConfigError, match="without a name"):
        parse_server_configs('{"command": "npx", "args": ["x"]}')


@pytest.mark.parametrize("text", ["[]", '"npx"', '{"mcpServers": 3}', '{"mcpServers": [], "version": 9}'])
def test_documents_of_the_wrong_shape_are_config_errors(text: str) -> None:
    """Non-objects, a non-object mcpServers and a newer export version are rejected as a whole."""
    with pytest.raises(ConfigError):
        parse_server_configs(text)


def test_empty_document_has_no_entries_and_says_so() -> None:
    """{} imports nothing and notes it."""
    report = parse_server_configs("{}")
    assert report.entries == ()
    assert "no servers were found" in report.notes


def test_invalid_json_error_gives_line_and_column_without_content() -> None:
    """A syntax error names line and column, and does not echo the text (it may hold tokens)."""
    text = '{\n  "mcpServers": {\n    "a": {"command": "npx" "env": {"T": "SECRET-x"}}\n  }\n}'
    column = text.splitlines()[2].index('"env"') + 1
    with pytest.raises(ConfigError, match=rf"line 3, column {column};") as caught:
        parse_server_configs(text)
    assert "SECRET" not in str(caught.value)


def test_jsonc_stripping_respects_strings() -> None:
    """`//`, `/*` and commas inside strings (URLs, escaped quotes) are data, not syntax."""
    text = """{"servers": {
      /* block
         comment */ "a": {"url": "https://h.example/a//b/*c*/", "headers": {"X-Q": "say \\"hi\\", // not a comment"}},
    }}"""
    report = parse_server_configs(text)
    record = _record(report.entries[0])
    assert record.config.url == "https://h.example/a//b/*c*/"
    assert record.config.headers["X-Q"] == 'say "hi", // not a comment'


def test_duplicate_keys_are_reported() -> None:
    """A server defined twice is noted (JSON keeps the last one) instead of vanishing silently."""
    report = parse_server_configs('{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}')
    assert report.records[0].config.command == "y"
    assert any("key 'a' appears more than once" in note for note in report.notes)


# ----------------------------------------------------------------------------- per-entry rules


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("type", "stdio", ServerType.STDIO),
        ("type", "sse", ServerType.SSE),
        ("type", "SSE", ServerType.SSE),
        ("type", "http", ServerType.HTTP),
        ("type", "streamable-http", ServerType.HTTP),
        ("type", "streamableHttp", ServerType.HTTP),
        ("type", "streamable_http", ServerType.HTTP),
        ("transport", "streamable-http", ServerType.HTTP),
        ("transportType", "sse", ServerType.SSE),
    ],
)
def test_transport_spellings(key: str, value: str, expected: ServerType) -> None:
    """Every common spelling of the transport maps to our ServerType."""
    config = {"command": "npx"} if expected is ServerType.STDIO else {"url": "https://h.example/mcp"}
    assert _record(_one({key: value, **config})).type is expected


def test_unknown_transport_is_an_error_naming_the_key() -> None:
    """An unsupported transport (websocket) is refused with the accepted spellings."""
    entry = _one({"transport": "websocket", "url": "wss://h.example"})
    assert entry.error is not None and entry.error.field == "transport"
    assert "'streamable-http'" in str(entry.error)


@pytest.mark.parametrize(
    ("timeout", "seconds", "as_millis"),
    [(60, 60.0, False), (1, 1.0, False), (3600, 3600.0, False), (3601, 3.601, True), (600000, 600.0, True)],
)
def test_timeout_rule_seconds_up_to_3600_else_milliseconds(timeout: int, seconds: float, as_millis: bool) -> None:
    """timeout <= 3600 is seconds (Cline, Roo); above is milliseconds (Gemini CLI, Claude Code), noted."""
    entry = _one({"command": "npx", "timeout": timeout})
    assert _record(entry).config.call_timeout == pytest.approx(seconds)
    assert any("milliseconds" in note for note in entry.notes) is as_millis


def test_our_own_timeout_keys_are_accepted_in_seconds() -> None:
    """connectTimeout, callTimeout and pingInterval may be given directly, in seconds."""
    entry = _one({"command": "npx", "connectTimeout": 5, "callTimeout": 9, "pingInterval": 0, "timeout": 60})
    config = _record(entry).config
    assert (config.connect_timeout, config.call_timeout, config.ping_interval) == (5.0, 9.0, 0.0)
    assert any("callTimeout was used" in note for note in entry.notes)


def test_conflicting_url_spellings_are_an_error() -> None:
    """url and serverUrl with different values is refused rather than guessed."""
    entry = _one({"url": "https://a.example/mcp", "serverUrl": "https://b.example/mcp"})
    assert entry.error is not None and entry.error.field == "url"
    assert "conflicts with serverUrl" in str(entry.error)


def test_leftover_keys_of_the_other_transport_are_dropped_with_a_note() -> None:
    """env on a remote server, headers on a stdio one: left out and noted, the entry still imports."""
    remote = _one({"url": "https://h.example/mcp", "env": {"T": "x"}})
    assert _record(remote).config.env == {}
    assert any("env is not used by http servers" in note for note in remote.notes)
    local = _one({"command": "npx", "headers": {"A": "b"}})
    assert _record(local).config.headers == {}
    assert any("headers is not used by stdio servers" in note for note in local.notes)


def test_null_env_values_are_dropped_with_a_note() -> None:
    """VS Code's null (unset a variable) cannot be expressed; it is dropped and noted."""
    entry = _one({"command": "npx", "env": {"KEEP": "1", "UNSET": None}})
    assert _record(entry).config.env == {"KEEP": "1"}
    assert any("env.UNSET is null" in note for note in entry.notes)


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"command": "npx", "disabled": "yes"}, "disabled"),
        ({"command": "npx", "trust": 1}, "trust"),
        ({"command": "npx", "autoApprove": "all"}, "autoApprove"),
        ({"command": "npx", "disabledTools": [1]}, "disabledTools"),
        ({"type": "sse", "httpUrl": "https://h.example/mcp"}, "httpUrl"),
        ({"type": "stdio", "url": "https://h.example/mcp"}, "config.command"),
    ],
)
def test_mistyped_source_keys_are_errors_naming_the_key(config: dict[str, Any], field: str) -> None:
    """A wrong type in a source key fails that entry with the key named."""
    entry = _one(config)
    assert entry.error is not None
    assert (entry.error.server, entry.error.field) == ("s", field)


def test_an_empty_server_name_is_an_error() -> None:
    """A server needs a name."""
    (entry,) = parse_server_configs('{"mcpServers": {" ": {"command": "npx"}}}').entries
    assert entry.error is not None and entry.error.field == "name"


def test_imported_records_get_fresh_ids_and_the_requested_install_source() -> None:
    """Every import makes new ids; install_source is recorded (protocol installs say so)."""
    text = '{"mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}}}'
    first = parse_server_configs(text, install_source=InstallSource.PROTOCOL)
    second = parse_server_configs(text)
    ids = [r.id for r in first.records] + [r.id for r in second.records]
    assert len(set(ids)) == 4
    assert {r.install_source for r in first.records} == {InstallSource.PROTOCOL}
    assert {r.install_source for r in second.records} == {InstallSource.MANUAL}


def test_public_names_are_exported_sorted() -> None:
    """The module's __all__ is sorted and every name in it exists."""
    assert import_module.__all__ == sorted(import_module.__all__)
    for name in import_module.__all__:
        assert hasattr(import_module, name)


def test_protocol_client_keys_are_kept() -> None:
    """Our own per-server keys of the protocol client side survive an import."""
    entry = _one(
        {
            "command": "npx",
            "resetTimeoutOnProgress": True,
            "maxTotalTimeout": 900,
            "logLevel": "warning",
            "protocol": "auto",
            "allowSampling": False,
            "allowElicitation": False,
            "allowRoots": False,
        }
    )
    config = _record(entry).config
    assert entry.unknown_keys == ()
    assert config.reset_timeout_on_progress is True
    assert config.max_total_timeout == 900.0
    assert config.log_level == "warning"
    assert config.protocol == "auto"
    assert (config.allow_sampling, config.allow_elicitation, config.allow_roots) == (False, False, False)


def test_oauth_is_kept_for_a_remote_server() -> None:
    """An oauth object on a remote entry becomes the record's config.oauth."""
    entry = _one({"url": "https://h.example/mcp", "oauth": {"clientId": "abc", "scopes": "read write"}})
    oauth = _record(entry).config.oauth
    assert oauth is not None and oauth.client_id == "abc"
    assert entry.unknown_keys == ()


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"command": "npx", "resetTimeoutOnProgress": "yes"}, "resetTimeoutOnProgress"),
        ({"command": "npx", "allowSampling": 0}, "allowSampling"),
        ({"command": "npx", "maxTotalTimeout": "long"}, "maxTotalTimeout"),
        ({"command": "npx", "logLevel": "loud"}, "config.logLevel"),
        ({"command": "npx", "protocol": "2099"}, "config.protocol"),
    ],
)
def test_mistyped_protocol_client_keys_name_the_key(config: dict[str, Any], field: str) -> None:
    """A wrong value in one of the protocol client keys fails the entry naming that key."""
    entry = _one(config)
    assert entry.error is not None
    assert (entry.error.server, entry.error.field) == ("s", field)


def test_the_fix_for_an_unresolved_input_names_the_option_of_its_field() -> None:
    """An unanswered ${input:ID} is fixed with the option that sets its field: --header, --arg, --env, --url ..."""
    document = {
        "mcpServers": {
            "hdr": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${input:token}"}},
            "arg": {"command": "srv", "args": ["--key", "${input:key}"]},
            "env": {"command": "srv", "env": {"KEY": "${input:key}"}},
            "url": {"url": "https://example.com/${input:path}"},
        }
    }
    notes = {entry.name: " ".join(entry.notes) for entry in parse_server_configs(json.dumps(document)).entries}
    assert "'mcp-actors servers update hdr --header 'Authorization=Bearer VALUE''" in notes["hdr"], notes["hdr"]
    assert "'mcp-actors servers update arg --arg=--key --arg=VALUE'" in notes["arg"], notes["arg"]
    assert "'mcp-actors servers update env --env KEY=VALUE'" in notes["env"], notes["env"]
    assert "'mcp-actors servers update url --url https://example.com/VALUE'" in notes["url"], notes["url"]
    assert not any("--env" in notes[name] for name in ("hdr", "arg", "url"))


def test_the_fix_for_a_placeholder_unresolved_at_start_names_the_option_of_its_field() -> None:
    """The start-time error (UnresolvedPlaceholder) names the option of the field the placeholder sits in."""
    from mcp_actors._config import variables
    from mcp_actors.errors import UnresolvedPlaceholder

    cases = {
        "config.headers.Authorization": "--header Authorization=VALUE",
        "config.env.KEY": "--env KEY=VALUE",
        "config.args[1]": "--arg=ARG ...",
        "config.url": "--url VALUE",
        "config.cwd": "--cwd VALUE",
        "config.envFile": "--env-file VALUE",
        "config.command": "--command VALUE",
    }
    for field, option in cases.items():
        with pytest.raises(UnresolvedPlaceholder) as error:
            variables.expand("${input:token}", field=field, server="gh", environ={})
        assert f"'mcp-actors servers update gh {option}" in str(error.value), str(error.value)
