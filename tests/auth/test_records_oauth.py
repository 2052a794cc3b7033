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
