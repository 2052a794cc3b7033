"""The conformance client: the program the official MCP conformance suite launches per client scenario.

The suite (npm ``@modelcontextprotocol/conformance``) starts a mock server for one scenario,
then runs ``<command> <server-url>`` with the scenario's name in ``MCP_CONFORMANCE_SCENARIO``,
the spec revision it speaks in ``MCP_CONFORMANCE_PROTOCOL_VERSION`` and, for some scenarios,
a JSON object in ``MCP_CONFORMANCE_CONTEXT`` (credentials, the arguments to send). It then
judges what reached its server.

This client is written only on mcp-actors' public API, as a host would write it: a runtime
(:func:`mcp_actors.open_runtime`) with one ``type: http`` record for the server, the host
callbacks (sampling, elicitation, roots), OAuth through ``config.oauth``, an
``authorization_handler`` and an ``assertion_handler``, then :class:`mcp_actors.McpService`
calls. What the suite measures is therefore the product, not a test harness of ours: every
request on the wire is one the runtime chose to send. Each scenario's handler does what that
scenario's server expects of a client (the scenario sources in the suite's package say what
that is).

Run by ``tests/conformance/run.py``; by hand::

    MCP_CONFORMANCE_SCENARIO=tools_call python tests/conformance/client.py http://localhost:PORT/mcp
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import traceback
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import mcp_types
import trio

from mcp_actors import McpService, open_runtime
from mcp_actors.auth import AssertionHandler, AssertionKind, AssertionRequest, MemoryTokenStore

logger = logging.getLogger("conformance.client")

SERVER = "conformance"
"""The name of the one record this client adds: the scenario's mock server."""

CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
"""The Client ID Metadata Document URL the suite's auth scenarios expect as the client id,
where the authorization server advertises ``client_id_metadata_document_supported``."""

HANDSHAKE_REVISIONS = frozenset({"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"})
"""Revisions that use the ``initialize`` handshake; later ones (2026-07-28) are stateless."""

STANDALONE_STREAM_GRACE = 0.5
"""Seconds to wait after connecting, for the standalone GET stream to open (see :func:`connect_and_listen`)."""

Scenario = Callable[[McpService, Mapping[str, Any]], Awaitable[None]]


# ------------------------------------------------------------------------------ the record


def protocol_mode(protocol_version: str | None) -> str:
    """The record's ``config.protocol`` for the revision the scenario's server speaks.

    A handshake-era mock answers only ``initialize``; the probe ``auto`` sends first
    (``server/discover``) would be a request it never expected, so those revisions get
    ``legacy``. Anything later, or no version at all, gets the default ``auto``.
    """
    if protocol_version in HANDSHAKE_REVISIONS:
        return "legacy"
    return "auto"


def oauth_config(scenario: str, context: Mapping[str, Any], key_dir: Path) -> dict[str, Any] | None:
    """``config.oauth`` for an auth scenario (``None`` for the others).

    Credentials come from the scenario's context: a pre-registered client, the client
    credentials grant with a secret or a ``private_key_jwt`` key (written to a file: the record
    names a key file, never holds a key). Enterprise-managed authorization names the IdP's token
    endpoint and this client at the IdP and at the authorization server; its ID token is the
    host's, asked through :func:`assertion_handler`. Workload identity federation names the
    file the workload's token is in, as a platform mounts it. Every other auth scenario is the
    authorization-code flow with the spec's discovery, offering the suite's Client ID Metadata
    Document URL.
    """
    if not scenario.startswith("auth/"):
        return None
    if scenario == "auth/enterprise-managed-authorization":
        return {
            "grant": "identity_assertion",
            "clientId": context["client_id"],
            "clientSecret": context["client_secret"],
            "idpTokenEndpoint": context["idp_token_endpoint"],
            "idpClientId": context["idp_client_id"],
        }
    if scenario == "auth/wif-jwt-bearer":
        token_file = key_dir / "workload-token"
        token_file.write_text(context["valid_jwt"])
        token_file.chmod(0o600)
        return {"grant": "workload_identity", "clientId": context["client_id"], "assertionFile": str(token_file)}
    if scenario == "auth/client-credentials-basic":
        return {
            "grant": "client_credentials",
            "clientId": context["client_id"],
            "clientSecret": context["client_secret"],
        }
    if scenario == "auth/client-credentials-jwt":
        key_file = key_dir / "client-key.pem"
        key_file.write_text(context["private_key_pem"])
        key_file.chmod(0o600)
        return {
            "grant": "client_credentials",
            "clientId": context["client_id"],
            "privateKeyFile": str(key_file),
            "signingAlgorithm": context.get("signing_algorithm") or "ES256",
        }
    oauth: dict[str, Any] = {"clientMetadataUrl": CLIENT_METADATA_URL}
    if "client_id" in context:
        oauth = {"clientId": context["client_id"]}
        if context.get("client_secret"):
            oauth["clientSecret"] = context["client_secret"]
    return oauth


def server_record(
    url: str, scenario: str, context: Mapping[str, Any], protocol_version: str | None, key_dir: Path
) -> dict[str, Any]:
    """The one record this client adds, in the config file's camelCase form."""
    config: dict[str, Any] = {"url": url, "protocol": protocol_mode(protocol_version)}
    oauth = oauth_config(scenario, context, key_dir)
    if oauth is not None:
        config["oauth"] = oauth
    return {"name": SERVER, "type": "http", "config": config}


# ------------------------------------------------------------------------------ host callbacks


def follow_authorization(authorization_url: str) -> str:
    """The headless login: fetch the authorization URL and return where it redirects.

    The suite's authorization server approves at once and answers with a redirect to our
    loopback redirect URI, carrying ``code``, ``state`` (and ``iss``). A person's browser
    would follow it to the loopback listener; the handler contract wants that URL, so it is
    read from ``Location`` and never followed.
    """

    class _NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(authorization_url, timeout=10) as response:
            raise RuntimeError(f"the authorization endpoint answered {response.status}, not a redirect")
    except urllib.error.HTTPError as exc:
        location = exc.headers.get("Location")
        if exc.code in (301, 302, 303, 307, 308) and location:
            return urllib.parse.urljoin(authorization_url, location)
        raise RuntimeError(f"the authorization endpoint answered {exc.code}, not a redirect") from None


async def authorize(server_id: str, authorization_url: str) -> str:
    """The runtime's ``authorization_handler``: :func:`follow_authorization` in a worker thread."""
    return await trio.to_thread.run_sync(follow_authorization, authorization_url)


def assertion_handler(context: Mapping[str, Any]) -> AssertionHandler:
    """The runtime's ``assertion_handler``: the user's ID token, as a host that did single sign-on holds it.

    The enterprise-managed authorization scenario's context carries the ID token its IdP
    issued (``idp_id_token``); a host would have it from its own OpenID Connect login.
    """

    async def provide(server_id: str, request: AssertionRequest) -> str:
        if request.kind is not AssertionKind.ID_TOKEN or "idp_id_token" not in context:
            raise LookupError(f"this host holds no {request.kind.value} token")
        return str(context["idp_id_token"])

    return provide


async def sample(server_id: str, params: mcp_types.CreateMessageRequestParams) -> mcp_types.CreateMessageResult:
    """A stand-in model: declares sampling to servers; no scenario judges the answer's text."""
    return mcp_types.CreateMessageResult(
        role="assistant", model="conformance-stub", content=mcp_types.TextContent(type="text", text="")
    )


def elicitation_handler(answer: Mapping[str, Any]) -> Callable[[str, mcp_types.ElicitRequestParams], Any]:
    """An elicitation handler that accepts with ``answer``.

    The runtime fills the requested schema's defaults into fields the answer leaves out
    (SEP-1034), so most scenarios answer ``{}`` and the defaults are the runtime's work.
    """

    async def elicit(server_id: str, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        return mcp_types.ElicitResult(action="accept", content=dict(answer))

    return elicit


ELICITATION_ANSWERS: dict[str, dict[str, Any]] = {
    # Its server asks a yes/no question with no default (SEP-2322's input-required retries).
    "sep-2322-client-request-state": {"confirmed": True},
}


# ------------------------------------------------------------------------------ scenarios

SCENARIOS: dict[str, Scenario] = {}


def scenario(*names: str) -> Callable[[Scenario], Scenario]:
    """Register a handler for the scenarios ``names``."""

    def register(handler: Scenario) -> Scenario:
        for name in names:
            SCENARIOS[name] = handler
        return handler

    return register


@scenario("initialize", "json-schema-ref-no-deref")
async def list_tools(service: McpService, context: Mapping[str, Any]) -> None:
    """Connect and list the tools: the handshake (or discovery) is what is judged.

    ``json-schema-ref-no-deref`` lists a tool whose schema has a network ``$ref``: a client
    passes by never fetching it, and its server serves nothing but the listing.
    """
    await service.list_server_tools(SERVER)


@scenario("tools_call", "request-metadata", "http-standard-headers")
async def add_numbers(service: McpService, context: Mapping[str, Any]) -> None:
    """List, then call ``add_numbers``: the call's arguments, ``_meta`` and ``Mcp-*`` headers are judged."""
    await service.list_server_tools(SERVER)
    await service.call_tool(SERVER, "add_numbers", {"a": 5, "b": 3})


async def connect_and_listen(service: McpService) -> None:
    """Connect, then give the runtime time to open its standalone GET stream before any call.

    At a handshake revision the runtime opens the optional standalone GET stream once the
    handshake is done, in the background and on a new connection, while the first requests
    go out at once on the warm one; on a loaded machine the stream opens after the first
    call. Two scenarios' servers depend on it being open before the call (``sse-retry``,
    ``elicitation-sep1034-client-defaults``: docs/conformance.md, "The standalone GET stream
    opens after the first call"); for them the client waits, as a host does that does not
    call within milliseconds of connecting.
    """
    await service.connect(SERVER)
    await trio.sleep(STANDALONE_STREAM_GRACE)


@scenario("sse-retry")
async def reconnect_after_close(service: McpService, context: Mapping[str, Any]) -> None:
    """Call the tool whose SSE stream the server closes before answering (SEP-1699).

    The answer comes on the stream the client must reopen with ``GET``, after the ``retry``
    delay and with ``Last-Event-ID``.

    Its server answers the pending call on whichever GET comes first after the call, the
    standalone stream included (the spec reserves answers for a stream resumed with
    ``Last-Event-ID``), and times that GET as the reconnection: see
    :func:`connect_and_listen`. With the standalone stream open first, the retry delay and
    ``Last-Event-ID`` of the resumption are what the scenario measures.
    """
    await connect_and_listen(service)
    await service.list_server_tools(SERVER)
    await service.call_tool(SERVER, "test_reconnection", {})


@scenario("json-schema-2020-12-preservation")
async def echo_schema(service: McpService, context: Mapping[str, Any]) -> None:
    """Send back the input schema the client observed for the focal tool, verbatim.

    The server compares it with its fixture: a keyword of JSON Schema 2020-12 lost or changed
    on the way through the listing (``$defs``, ``$anchor``, ``if``/``then``/``else``) fails.
    """
    tools = await service.list_server_tools(SERVER)
    focal = next(tool for tool in tools if tool.name == "json_schema_2020_12_tool")
    await service.call_tool(SERVER, "json_schema_echo", {"schema": focal.input_schema})


def stub_arguments(input_schema: Mapping[str, Any]) -> dict[str, Any]:
    """The smallest arguments that satisfy a schema's ``required`` list, by each property's type."""
    by_type: dict[str, Any] = {"string": "x", "integer": 0, "number": 0, "boolean": False, "object": {}, "array": []}
    properties = input_schema.get("properties", {})
    return {name: by_type.get(properties.get(name, {}).get("type"), "x") for name in input_schema.get("required", [])}


@scenario("http-invalid-tool-headers")
async def call_every_listed_tool(service: McpService, context: Mapping[str, Any]) -> None:
    """Call every tool the runtime lists (SEP-2243).

    Its server lists one valid tool and ten with malformed ``x-mcp-header`` marks: a
    conforming client drops those from the listing, so they are never called here.
    """
    for tool in await service.list_server_tools(SERVER):
        try:
            await service.call_tool(SERVER, tool.name, stub_arguments(tool.input_schema))
        except Exception:
            logger.exception("call_tool(%r) failed", tool.name)


@scenario("http-custom-headers")
async def replay_tool_calls(service: McpService, context: Mapping[str, Any]) -> None:
    """Send the calls the scenario's context names, arguments verbatim (SEP-2243).

    Their values are the edge cases of the ``Mcp-Param-*`` headers: plain, numeric and boolean
    values, the base64 form for unsafe ones, and a null value whose header must be left out.
    """
    listed = {tool.name for tool in await service.list_server_tools(SERVER)}
    for call in context.get("toolCalls", []):
        if call["name"] not in listed:
            logger.warning("skipping %r: not in the listing", call["name"])
            continue
        await service.call_tool(SERVER, call["name"], call.get("arguments") or {})


@scenario("elicitation-sep1034-client-defaults")
async def elicitation_defaults(service: McpService, context: Mapping[str, Any]) -> None:
    """Call the tool that elicits a form whose fields all have defaults; the answer is ``{}`` (SEP-1034).

    Its server (the TypeScript SDK's) sends the elicitation unrelated to the call, so on the
    standalone GET stream, and drops it when that stream is not open yet: see
    :func:`connect_and_listen`.
    """
    await connect_and_listen(service)
    await service.list_server_tools(SERVER)
    await service.call_tool(SERVER, "test_client_elicitation_defaults", {})


@scenario("sep-2322-client-request-state")
async def input_required_retries(service: McpService, context: Mapping[str, Any]) -> None:
    """Drive the input-required retries (SEP-2322): each call is one ``call_tool``; the runtime retries.

    Judged: ``requestState`` echoed unchanged (and left out when the server sent none), a
    fresh request id per retry, no retry state on the unrelated call between, and no retry
    of a result without ``resultType``.
    """
    await service.list_server_tools(SERVER)
    for name in ("test_mrtr_echo_state", "test_mrtr_unrelated", "test_mrtr_no_state", "test_mrtr_no_result_type"):
        await service.call_tool(SERVER, name, {})


@scenario(
    "sep-2640-client-no-prefetch",
    "sep-2640-client-verify-digest",
    "sep-2640-client-verify-size",
    "sep-2640-client-verify-frontmatter",
)
async def skills_host(service: McpService, context: Mapping[str, Any]) -> None:
    """Connect and list resources, as a host that does not implement the skills extension does.

    The runtime has no ``skills/list`` (SEP-2640); these servers judge a client that does, so
    they report their checks as skipped: a pass that proves only that nothing was prefetched.
    """
    await service.list_resources(SERVER)


async def authorized_session(service: McpService, context: Mapping[str, Any]) -> None:
    """Every ``auth/*`` scenario: list the tools, then call the first, through whatever OAuth it takes.

    The flow is the runtime's: the 401, discovery, registration or the configured client,
    the headless authorization-code login through :func:`authorize`, step-up, refresh. A
    scenario that wants the client to refuse (a mismatched resource, a wrong ``iss``) ends
    in the runtime's typed error, which the suite allows.
    """
    tools = await service.list_server_tools(SERVER)
    if tools:
        await service.call_tool(SERVER, tools[0].name, {})


# ------------------------------------------------------------------------------ main


async def run(url: str, scenario_name: str, context: Mapping[str, Any], protocol_version: str | None) -> None:
    """One scenario: a runtime with one record for ``url``, then the scenario's handler.

    The config and every file the runtime keeps live in a temporary directory (tokens in
    memory), so nothing of the user's is read or touched.
    """
    handler = SCENARIOS.get(scenario_name)
    if handler is None:
        if not scenario_name.startswith("auth/"):
            raise SystemExit(f"conformance client: no handler for scenario {scenario_name!r}")
        handler = authorized_session
    with tempfile.TemporaryDirectory(prefix="mcp-actors-conformance-") as tmp:
        directory = Path(tmp)
        config = directory / "mcp-config.json"
        config.write_text('{"mcpServers": []}')  # an existing file: no built-in demo server
        os.environ["MCP_ACTORS_STATE_DIR"] = str(directory / "state")  # the process ledger, the reaper's files
        async with open_runtime(
            config,
            sweep_ledger=False,
            authorization_handler=authorize,
            assertion_handler=assertion_handler(context),
            token_store=MemoryTokenStore(),
            sampling_handler=sample,
            elicitation_handler=elicitation_handler(ELICITATION_ANSWERS.get(scenario_name, {})),
            roots=[],
        ) as runtime:
            await runtime.service.add(server_record(url, scenario_name, context, protocol_version, directory))
            await handler(runtime.service, context)


def main(argv: list[str]) -> int:
    """Read the suite's contract (argument and environment), run the scenario, exit 0 when it ran through."""
    if len(argv) != 2:
        print("usage: MCP_CONFORMANCE_SCENARIO=<name> client.py <server-url>", file=sys.stderr)
        return 2
    scenario_name = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    if not scenario_name:
        print("conformance client: MCP_CONFORMANCE_SCENARIO is not set", file=sys.stderr)
        return 2
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    protocol_version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION") or None
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logger.info("scenario %s at %s, protocol %s", scenario_name, argv[1], protocol_version)
    try:
        trio.run(run, argv[1], scenario_name, context, protocol_version)
    except Exception:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
