"""The agent-loop example of docs/adapters.md runs as written (with a scripted stand-in for the OpenAI API)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletion

DOC = Path(__file__).parents[2] / "docs" / "adapters.md"


def example_code() -> str:
    blocks: list[str] = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    [runnable] = [block for block in blocks if "trio.run(main)" in block]
    return runnable


class ScriptedCompletions:
    """Answers like the chat completions API: first two tool calls, then a final text built from their results."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    async def create(
        self, *, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> ChatCompletion:
        from openai.types.chat import ChatCompletion

        self.requests.append({"model": model, "messages": list(messages), "tools": tools})
        if len(self.requests) == 1:
            message: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    call("c1", "mcp__demo__echo", '{"text": "hello"}'),
                    call("c2", "demo__add", '{"a": 2, "b": 3}'),
                    call("c3", "demo__sleep", '{"seconds": -1}'),
                ],
            }
        else:
            outputs = [m["content"] for m in messages if m.get("role") == "tool"]
            message = {"role": "assistant", "content": " | ".join(outputs)}
        return ChatCompletion.model_validate(
            {
                "id": f"r{len(self.requests)}",
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
            }
        )


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_agent_loop_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README example offers registry and direct tools to the model, runs its calls and feeds back the results."""
    import openai

    completions = ScriptedCompletions()

    class FakeClient:
        def __init__(self) -> None:
            self.chat = type("Chat", (), {"completions": completions})()

    monkeypatch.setattr(openai, "AsyncOpenAI", FakeClient)
    monkeypatch.setenv("MCP_ACTORS_CONFIG", str(tmp_path / "mcp-config.json"))
    exec(compile(example_code(), str(DOC), "exec"), {"__name__": "docs_example"})
    first, second = completions.requests
    names = [tool["function"]["name"] for tool in first["tools"]]
    assert "mcp__demo__echo" in names and "demo__add" in names
    assert len(names) == len(set(names))
    printed = capsys.readouterr().out
    # echo's text, add's sum, and the server's own complaint about a bad argument, marked as an error.
    assert printed.startswith("hello | 5.0 | Error: ") and "seconds" in printed
    assert second["messages"][1]["tool_calls"][0]["function"]["name"] == "mcp__demo__echo"
