"""config.oauth: validated like every field, round-tripped, its secret hidden."""

from __future__ import annotations

import pytest

from mcp_actors._config.codec import record_from_json_dict, record_to_json_dict
from mcp_actors._config.record import DpopMode, McpServerRecord, OAuthConfig, OAuthGrant
from mcp_actors.errors import InvalidServerConfig


def _record(oauth: object, type_: str = "http") -> dict[str, object]:
    config: dict[str, object] = {"url": "https://mcp.example/mcp"} if type_ != "stdio" else {"command": "npx"}
    config["oauth"] = oauth
    return {"id": "mcp_1_a", "name": "remote", "type": type_, "config": config}


def test_full_oauth_settings_round_trip() -> None:
    """Every oauth field survives the camelCase JSON round trip; defaults are left out on disk."""
    data = _record(
        {
            "clientId": "c",
            "clientSecret": "s",
            "scopes": ["a", "b"],
            "grant": "client_credentials",
            "redirectPort": 8765,
        }
    )
    record = record_from_json_dict(data)
    assert record.config.oauth == OAuthConfig(
        client_id="c", client_secret="s", scopes=("a", "b"), grant=OAuthGrant.CLIENT_CREDENTIALS, redirect_port=8765
    )
    assert record_from_json_dict(record_to_json_dict(record)) == record
    assert record_to_json_dict(record_from_json_dict(_record({})))["config"]["oauth"] == {}


@pytest.mark.parametrize(
    ("oauth", "field", "words"),
    [
        ({"clientSecret": "s"}, "config.oauth.clientSecret", "needs clientId"),
        ({"grant": "client_credentials"}, "config.oauth.clientId", "required"),
        ({"grant": "client_credentials", "clientId": "c"}, "config.oauth.clientSecret", "privateKeyFile"),
        (
            {"grant": "client_credentials", "clientId": "c", "clientSecret": "s", "privateKeyFile": "/k"},
            "config.oauth.privateKeyFile",
            "exclude",
        ),
        ({"privateKeyFile": "/k"}, "config.oauth.privateKeyFile", "client_credentials"),
        ({"signingAlgorithm": "HS256"}, "config.oauth.signingAlgorithm", "RS256"),
        ({"redirectPort": 0}, "config.oauth.redirectPort", "1..65535"),
        ({"redirectPort": "80"}, "config.oauth.redirectPort", "integer"),
        ({"scopes": ["a b"]}, "config.oauth.scopes[0]", "without spaces"),
        ({"clientMetadataUrl": "http://x.example/c.json"}, "config.oauth.clientMetadataUrl", "https"),
        ({"grant": "implicit"}, "config.oauth.grant", "authorization_code"),
        ({"clientID": "c"}, "config.oauth.clientID", "did you mean 'clientId'"),
        ({"dpop": "yes"}, "config.oauth.dpop", 'must be true, false or "auto"'),
        ({"dpop": 1}, "config.oauth.dpop", 'must be true, false or "auto", got a number'),
        ([], "config.oauth", "object"),
    ],
)
def test_each_bad_oauth_field_is_named(oauth: object, field: str, words: str) -> None:
    """A bad oauth setting is an InvalidServerConfig naming its camelCase path and what is expected."""
    with pytest.raises(InvalidServerConfig) as caught:
        record_from_json_dict(_record(oauth))
    assert caught.value.field == field
    assert words in str(caught.value)


@pytest.mark.parametrize(("value", "mode"), [(True, DpopMode.ON), (False, DpopMode.OFF), ("auto", DpopMode.AUTO)])
def test_dpop_is_true_false_or_auto_and_round_trips(value: object, mode: DpopMode) -> None:
    """config.oauth.dpop reads JSON true/false/"auto" and writes them back; auto is the default, left out on disk."""
    record = record_from_json_dict(_record({"dpop": value}))
    assert record.config.oauth is not None and record.config.oauth.dpop is mode
    written = record_to_json_dict(record)["config"]["oauth"]
    assert written == ({} if mode is DpopMode.AUTO else {"dpop": value})
    assert OAuthConfig().dpop is DpopMode.AUTO
    assert OAuthConfig(dpop=value).dpop is mode  # type: ignore[arg-type]


def test_oauth_is_only_for_remote_servers() -> None:
    """A stdio record with oauth settings is rejected, naming config.oauth."""
    with pytest.raises(InvalidServerConfig, match=r"config\.oauth is only for sse/http servers"):
        record_from_json_dict(_record({}, "stdio"))


def test_client_secret_is_hidden_in_reprs_and_errors() -> None:
    """The client secret never shows in a record's repr, nor in a validation error about its record."""
    record = record_from_json_dict(_record({"clientId": "c", "clientSecret": "hush-hush-secret"}))
    assert "hush-hush-secret" not in repr(record)
    with pytest.raises(InvalidServerConfig) as caught:
        record_from_json_dict(_record({"clientSecret": "hush-hush-secret", "redirectPort": -1}))
    assert "hush-hush-secret" not in str(caught.value)
    assert isinstance(record, McpServerRecord)


def test_assertion_grant_settings_are_written_and_read_back() -> None:
    """The identity_assertion and workload_identity fields come back unchanged from their camelCase JSON."""
    enterprise = {
        "grant": "identity_assertion",
        "clientId": "mcp-client",
        "clientSecret": "s",
        "issuer": "https://as.example",
        "idpTokenEndpoint": "https://idp.example/oauth2/token",
        "idpClientId": "idp-client",
        "idpClientSecret": "t",
        "audience": "https://as.example/",
        "resource": "https://mcp.example/mcp",
        "assertionFile": "~/.cache/id-token",
    }
    workload = {"grant": "workload_identity", "clientId": "w", "assertionEnv": "MCP_WORKLOAD_TOKEN"}
    for oauth in (enterprise, workload):
        record = record_from_json_dict(_record(oauth))
        assert record_to_json_dict(record)["config"]["oauth"] == oauth
    record = record_from_json_dict(_record(enterprise))
    assert record.config.oauth is not None
    assert record.config.oauth.grant is OAuthGrant.IDENTITY_ASSERTION
    assert record.config.oauth.idp_token_endpoint == "https://idp.example/oauth2/token"
    # Plain http is for this machine only (tests, a local IdP).
    local = {**workload, "issuer": "http://127.0.0.1:8080"}
    assert record_from_json_dict(_record(local)).config.oauth == OAuthConfig(
        grant=OAuthGrant.WORKLOAD_IDENTITY, client_id="w", assertion_env="MCP_WORKLOAD_TOKEN", issuer=local["issuer"]
    )


_IA = {"grant": "identity_assertion", "clientId": "c", "idpTokenEndpoint": "https://idp.example/t", "idpClientId": "i"}


@pytest.mark.parametrize(
    ("oauth", "field", "words"),
    [
        ({**_IA, "clientId": None}, "config.oauth.clientId", "required for the identity_assertion grant"),
        ({**_IA, "idpTokenEndpoint": None}, "config.oauth.idpTokenEndpoint", "required"),
        ({**_IA, "idpClientId": None}, "config.oauth.idpClientId", "required"),
        ({**_IA, "idpTokenEndpoint": "http://idp.example/t"}, "config.oauth.idpTokenEndpoint", "https://"),
        ({**_IA, "idpTokenEndpoint": "https://idp.example/t#x"}, "config.oauth.idpTokenEndpoint", "fragment"),
        ({**_IA, "audience": "two words"}, "config.oauth.audience", "without spaces"),
        ({**_IA, "resource": ""}, "config.oauth.resource", "must not be empty"),
        ({**_IA, "assertionFile": "/t", "assertionEnv": "T"}, "config.oauth.assertionEnv", "exclude"),
        (
            {"grant": "workload_identity", "idpClientId": "i"},
            "config.oauth.idpClientId",
            "only for the identity_assertion",
        ),
        ({"grant": "workload_identity", "audience": "a"}, "config.oauth.audience", "only for the identity_assertion"),
        ({"grant": "workload_identity", "issuer": "https://as.example/#f"}, "config.oauth.issuer", "fragment"),
        ({"grant": "workload_identity", "assertionEnv": "1TOKEN"}, "config.oauth.assertionEnv", "environment variable"),
        ({"assertionFile": "/t"}, "config.oauth.assertionFile", "workload_identity"),
        (
            {"grant": "client_credentials", "clientId": "c", "clientSecret": "s", "issuer": "https://a.example"},
            "config.oauth.issuer",
            "only for the identity_assertion and workload_identity",
        ),
        ({"grant": "workload_identity", "privateKeyFile": "/k"}, "config.oauth.privateKeyFile", "client_credentials"),
    ],
)
def test_each_bad_assertion_grant_field_is_named(oauth: dict[str, object], field: str, words: str) -> None:
    """A missing or misplaced assertion-grant setting is an InvalidServerConfig naming its path and the fix."""
    with pytest.raises(InvalidServerConfig) as caught:
        record_from_json_dict(_record({key: value for key, value in oauth.items() if value is not None}))
    assert caught.value.field == field
    assert words in str(caught.value)


def test_idp_secret_and_a_misplaced_token_never_show() -> None:
    """The IdP client secret is hidden like the client secret; a token pasted as assertionEnv is not echoed."""
    record = record_from_json_dict(_record({**_IA, "idpClientSecret": "idp-hush-secret"}))
    assert "idp-hush-secret" not in repr(record)
    assert record.config.oauth is not None
    assert "idp-hush-secret" in record.config.oauth.secret_values()
    token = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ3In0.c2ln"
    with pytest.raises(InvalidServerConfig) as caught:
        record_from_json_dict(_record({"grant": "workload_identity", "assertionEnv": token}))
    assert token not in str(caught.value)
