"""The demo server's tasks: one table, shown the way each protocol revision asks for it.

* 2025-11-25, where tasks are core: a ``tools/call`` carrying ``task`` creates one;
  ``tasks/get``, ``tasks/result``, ``tasks/cancel`` and ``tasks/list`` serve it;
  ``notifications/tasks/status`` pushes it (registered by :mod:`mcp_actors._demo.features`).
* 2026-07-28, where tasks are the ``io.modelcontextprotocol/tasks`` extension (the MCP SDK does
  not implement it, so it is written here on the SDK's low-level server): the server
  advertises it in ``server/discover``; a ``tools/call`` of a task tool from a client that
  declares the extension *in that request* answers ``resultType: "task"`` (the server
  decides; the client never asks); ``tasks/get`` shows the task with its result, error or
  input requests inline; ``tasks/update`` takes the answers to those requests;
  ``tasks/cancel`` is an acknowledgement; ``notifications/tasks`` pushes a task's state.
  ``tasks/result`` and ``tasks/list`` do not exist there (method not found), and a task
  method from a client that did not declare the extension is refused with ``-32021``.

A task's work is modelled on the server's clock, so it needs no background task: it is done
``seconds`` after it was created (or after its question was answered). The clock is the one
of the loop the server runs on: trio's when it runs inside trio (virtual in a test on
``MockClock``), else the monotonic clock.
"""

from __future__ import annotations

import datetime as _dt
import time
import uuid
from typing import Any, Final

import mcp_types as types
import trio
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

__all__ = [
    "ASK_KEY",
    "TASKS_EXTENSION",
    "TASK_TOOL",
    "TaskTable",
    "UpdateTaskParams",
    "declared_tasks",
    "modern",
    "refuse_undeclared",
    "unknown_task",
]

TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
"""The extension's identifier (SEP-2663)."""

TASK_TOOL: Final = "research"
"""The tool that must be called as a task (``execution.taskSupport: required`` at 2025-11-25)."""

ASK_KEY: Final = "confirm"
"""The input request a task of ``count(ask=true)`` waits on (2026-07-28: answered by ``tasks/update``)."""

POLL_MS: Final = 50
MAX_TASK_SECONDS: Final = 3600.0
_TTL_MS: Final = 60_000
_MISSING_CAPABILITY: Final = -32021
"""MISSING_REQUIRED_CLIENT_CAPABILITY (2026-07-28)."""


def _now() -> float:
    """The server's loop clock: trio's inside trio (virtual under ``MockClock``), else the monotonic one."""
    try:
        return trio.current_time()
    except RuntimeError:
        return time.monotonic()


def _iso_now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat().replace("+00:00", "Z")


def unknown_task(task_id: str) -> MCPError:
    """The error for a task id this server never made (or forgot)."""
    return MCPError(code=types.INVALID_PARAMS, message=f"unknown task {task_id!r}")


def modern(ctx: Any) -> bool:
    """Whether the request came at 2026-07-28 (the extension's revision)."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def declared_tasks(ctx: Any) -> bool:
    """Whether this request's client declared the tasks extension (its per-request capabilities)."""
    caps = ctx.session.client_capabilities
    return bool(caps is not None and caps.extensions and TASKS_EXTENSION in caps.extensions)


def refuse_undeclared(ctx: Any) -> None:
    """Refuse a task method from a client that did not declare the extension on it (-32021)."""
    if not declared_tasks(ctx):
        raise MCPError(
            code=_MISSING_CAPABILITY,
            message="Missing required client capability",
            data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
        )


class UpdateTaskParams(types.RequestParams):
    """``tasks/update`` (2026-07-28): the answers to a task's outstanding input requests."""

    task_id: str
    input_responses: dict[str, Any] = Field(default_factory=dict)


class TaskTable:
    """The server's tasks: each is done ``seconds`` after creation (or after its question's answer) unless cancelled."""

    def __init__(self) -> None:
        self.tasks: dict[str, dict[str, Any]] = {}

    def create(self, tool: str, arguments: dict[str, Any], *, ask: bool = False) -> str:
        """A new task of ``tool`` called with ``arguments``; ``ask``: it first waits for a confirmation."""
        task_id = uuid.uuid4().hex
        seconds = float(arguments.get("seconds", 0.2))
        seconds = min(max(seconds, 0.0), MAX_TASK_SECONDS)
        now = _iso_now()
        self.tasks[task_id] = {
            "tool": tool,
            "arguments": arguments,
            "seconds": seconds,
            "due": None if ask else _now() + seconds,
            "created": now,
            "cancelled": False,
            "answer": None,
            "poll_ms": min(max(int(arguments.get("poll_ms", POLL_MS)), POLL_MS), 3_600_000),
        }
        return task_id

    def entry(self, task_id: str) -> dict[str, Any]:
        entry = self.tasks.get(task_id)
        if entry is None:
            raise unknown_task(task_id)
        return entry

    def status(self, task_id: str) -> str:
        entry = self.entry(task_id)
        if entry["cancelled"]:
            return "cancelled"
        if entry["due"] is None:
            return "input_required"
        if _now() < entry["due"]:
            return "working"
        return "failed" if entry["arguments"].get("fail") else "completed"

    def _message(self, task_id: str, status: str) -> str:
        entry = self.entry(task_id)
        if status == "working":
            return f"{max(0.0, entry['due'] - _now()):.1f}s left"
        if status == "input_required":
            return "waiting for a confirmation"
        return status

    def view(self, task_id: str) -> types.Task:
        """The task as 2025-11-25 shows it."""
        entry = self.entry(task_id)
        status = self.status(task_id)
        return types.Task(
            task_id=task_id,
            status=status,  # type: ignore[arg-type]
            status_message=self._message(task_id, status),
            created_at=entry["created"],
            last_updated_at=_iso_now(),
            ttl=_TTL_MS,
            poll_interval=entry["poll_ms"],
        )

    def detailed(self, task_id: str) -> dict[str, Any]:
        """The task as the 2026-07-28 extension shows it (a ``DetailedTask``: payload inline)."""
        entry = self.entry(task_id)
        status = self.status(task_id)
        shown: dict[str, Any] = {
            "taskId": task_id,
            "status": status,
            "statusMessage": self._message(task_id, status),
            "createdAt": entry["created"],
            "lastUpdatedAt": _iso_now(),
            "ttlMs": _TTL_MS,
            "pollIntervalMs": entry["poll_ms"],
        }
        if status == "input_required":
            n = int(entry["arguments"].get("n", 3))
            shown["inputRequests"] = {
                ASK_KEY: {
                    "method": "elicitation/create",
                    "params": {
                        "mode": "form",
                        "message": f"Count to {n}?",
                        "requestedSchema": {
                            "type": "object",
                            "properties": {"ok": {"type": "boolean", "description": "Go ahead."}},
                            "required": ["ok"],
                        },
                    },
                }
            }
        elif status == "completed":
            shown["result"] = self.result(task_id).model_dump(by_alias=True, mode="json", exclude_none=True)
        elif status == "failed":
            shown["error"] = {"code": types.INTERNAL_ERROR, "message": f"{entry['tool']} failed on purpose"}
        return shown

    def answer(self, task_id: str, responses: dict[str, Any]) -> None:
        """Take the answer to the task's question (an unknown or already answered key is ignored)."""
        entry = self.entry(task_id)
        answer = responses.get(ASK_KEY)
        if entry["due"] is not None or not isinstance(answer, dict):
            return
        entry["answer"] = answer
        entry["due"] = _now() + entry["seconds"]

    def cancel(self, task_id: str) -> None:
        self.entry(task_id)["cancelled"] = True

    def finish(self, task_id: str) -> None:
        """End the task's work now (its question, if any, stays open)."""
        entry = self.entry(task_id)
        if entry["due"] is not None:
            entry["due"] = min(entry["due"], _now())

    def result(self, task_id: str) -> types.CallToolResult:
        entry = self.entry(task_id)
        if entry["tool"] == TASK_TOOL:
            text = f"research on {entry['arguments'].get('topic', '?')!s}: done"
            return types.CallToolResult(content=[types.TextContent(text=text)])
        n = int(entry["arguments"].get("n", 3))
        text = " ".join(str(i) for i in range(1, n + 1))
        answer = entry["answer"]
        if answer is not None:
            confirmed = answer.get("action") == "accept" and (answer.get("content") or {}).get("ok") is True
            if not confirmed:
                return types.CallToolResult(content=[types.TextContent(text="not confirmed")], is_error=True)
            text += " (confirmed)"
        return types.CallToolResult(content=[types.TextContent(text=text)])
