"""The SDK's records about our connections go to ``mcp_actors.sdk.*`` at DEBUG; the host's own stay."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import mcp
import pytest

from mcp_actors._config.redact import registered_secrets
from mcp_actors._config.sdk_logs import SDK_LOGGERS, sdk_logs_owned

SECRET = "routed-secret-value-99"


def test_a_record_about_our_connection_is_logged_again_under_our_name_redacted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Inside ``sdk_logs_owned`` an SDK ERROR becomes a DEBUG record of ``mcp_actors.sdk.<name>``, redacted."""
    caplog.set_level(logging.DEBUG)
    with registered_secrets([SECRET]), sdk_logs_owned():
        try:
            raise RuntimeError(f"failed with {SECRET}")
        except RuntimeError:
            logging.getLogger("mcp.client.sse").exception("Error in sse_reader at %s", f"http://h/?k={SECRET}")
    [record] = [r for r in caplog.records if "sse_reader" in r.getMessage()]
    assert (record.name, record.levelname) == ("mcp_actors.sdk.mcp.client.sse", "DEBUG")
    assert "(the SDK logged it at ERROR)" in record.getMessage()
    text = logging.Formatter().format(record)
    assert "RuntimeError" in text and SECRET not in text


def test_the_hosts_own_sdk_records_are_left_alone(caplog: pytest.LogCaptureFixture) -> None:
    """Outside our connections the SDK's logger keeps its record, its name and its level."""
    caplog.set_level(logging.DEBUG)
    logging.getLogger("mcp.client.sse").error("the host's own SSE client broke")
    [record] = [r for r in caplog.records if "the host's own" in r.getMessage()]
    assert (record.name, record.levelname) == ("mcp.client.sse", "ERROR")


def test_every_sdk_client_logger_that_warns_is_routed() -> None:
    """Each module of the SDK's client side (and what it shares) that logs at WARNING or above is listed."""
    root = Path(mcp.__file__).parent
    warns = re.compile(r"\blogger\.(warning|error|exception|critical)\(")
    literal = re.compile(r"getLogger\(\"([^\"]+)\"\)")
    missing = []
    for path in [*root.glob("client/**/*.py"), *root.glob("shared/**/*.py")]:
        if path.name == "__main__.py":
            continue  # the SDK's own command-line client, not a library module we drive
        source = path.read_text(encoding="utf-8")
        if not warns.search(source):
            continue
        module = ".".join(("mcp", *path.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
        found = literal.search(source)
        name = found.group(1) if found else module
        if name not in SDK_LOGGERS:
            missing.append(name)
    assert missing == []
