"""Importing the OAuth settings of host configs (Claude Code, Gemini CLI, ours)."""

from __future__ import annotations

import json

from mcp_actors._config.host_import import parse_server_configs
from mcp_actors._config.record import DpopMode, OAuthConfig, OAuthGrant


def _one(config: dict[str, object]) -> tuple[OAuthConfig | None, tuple[str, ...]]:
    (entry,) = parse_server_configs(json.dumps({"mcpServers": {"remote": config}})).entries
    assert entry.record is not None, entry.error
    return entry.record.config.oauth, entry.notes


def test_claude_code_oauth_client_and_callback_port() -> None:
    """Claude Code's oauth.clientId and callbackPort become clientId and redirectPort."""
    oauth, _ = _one(
        {"type": "http", "url": "https://mcp.example/mcp", "oauth": {"clientId": "cc", "callbackPort": 8765}}
    )
    assert oauth == OAuthConfig(client_id="cc", redirect_port=8765)


def test_gemini_cli_oauth_keeps_client_scopes_and_loopback_port() -> None:
    """Gemini CLI's oauth: client, secret and scopes kept; the loopback redirect's port kept; endpoints noted."""
    oauth, notes = _one(
        {
            "httpUrl": "https://mcp.example/mcp",
            "authProviderType": "dynamic_discovery",
            "oauth": {
                "enabled": True,
                "clientId": "gem",
                "clientSecret": "gem-secret",
                "scopes": ["read", "write"],
                "redirectUri": "http://localhost:7777/oauth/callback",
                "authorizationUrl": "https://auth.example/authorize",
                "tokenUrl": "https://auth.example/token",
            },
        }
    )
    assert oauth == OAuthConfig(
        client_id="gem", client_secret="gem-secret", scopes=("read", "write"), redirect_port=7777
    )
    assert any("authorizationUrl" in note for note in notes)
    assert all("gem-secret" not in note for note in notes)


def test_disabled_oauth_and_client_credentials_spellings() -> None:
    """enabled: false imports no settings; grantType client-credentials and a scope string are understood."""
    oauth, notes = _one({"url": "https://mcp.example/mcp", "oauth": {"enabled": False, "clientId": "x"}})
    assert oauth is None and any("enabled is false" in note for note in notes)
    oauth, _ = _one(
        {
            "url": "https://mcp.example/mcp",
            "oauth": {"grantType": "client-credentials", "clientId": "m", "clientSecret": "s", "scopes": "a b"},
        }
    )
    assert oauth is not None and oauth.grant is OAuthGrant.CLIENT_CREDENTIALS and oauth.scopes == ("a", "b")


def test_our_own_dpop_setting_is_imported() -> None:
    """Our format's config.oauth.dpop survives an import (true, false or "auto")."""
    oauth, _ = _one({"type": "http", "url": "https://mcp.example/mcp", "oauth": {"dpop": False}})
    assert oauth == OAuthConfig(dpop=DpopMode.OFF)


def test_invalid_oauth_is_an_entry_error_naming_the_field() -> None:
    """An oauth setting that cannot work is an entry error naming config.oauth.<field>; other entries import."""
    text = json.dumps(
        {
            "mcpServers": {
                "bad": {"url": "https://a.example/mcp", "oauth": {"grant": "client_credentials"}},
                "good": {"url": "https://b.example/mcp"},
            }
        }
    )
    bad, good = parse_server_configs(text).entries
    assert bad.error is not None and bad.error.field == "config.oauth.clientId"
    assert good.record is not None


def test_oauth_of_a_stdio_entry_is_noted_and_left_out() -> None:
    """A stdio entry's oauth object is left out with a note (stdio servers take credentials from env)."""
    oauth, notes = _one({"command": "npx", "oauth": {"clientId": "x"}})
    assert oauth is None and any("stdio" in note for note in notes)


def test_assertion_grant_settings_import_with_their_issuer() -> None:
    """Our own assertion-grant keys are kept; ``issuer`` is kept for them and noted for the other grants."""
    oauth, notes = _one(
        {
            "url": "https://mcp.example/mcp",
            "oauth": {
                "grant": "workload-identity",
                "clientId": "w",
                "assertionFile": "/var/run/secrets/tokens/mcp",
                "issuer": "https://as.example",
            },
        }
    )
    assert oauth == OAuthConfig(
        grant=OAuthGrant.WORKLOAD_IDENTITY,
        client_id="w",
        assertion_file="/var/run/secrets/tokens/mcp",
        issuer="https://as.example",
    )
    assert not any("oauth" in note for note in notes)
    oauth, _ = _one(
        {
            "url": "https://mcp.example/mcp",
            "oauth": {
                "grant": "identity_assertion",
                "clientId": "c",
                "idpTokenEndpoint": "https://idp.example/token",
                "idpClientId": "i",
                "idpClientSecret": "idp-secret",
                "audience": "https://as.example/",
                "resource": "https://mcp.example/mcp",
                "assertionEnv": "ID_TOKEN",
            },
        }
    )
    assert oauth is not None and oauth.idp_client_secret == "idp-secret" and oauth.assertion_env == "ID_TOKEN"
    oauth, notes = _one({"url": "https://mcp.example/mcp", "oauth": {"clientId": "x", "issuer": "https://as.example"}})
    assert oauth == OAuthConfig(client_id="x") and any("issuer" in note for note in notes)
