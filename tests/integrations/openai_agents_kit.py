"""The scripted model of the OpenAI Agents SDK tests: imported by the tests that run it, not when they are collected."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from agents import RunConfig
from agents.agent_output import AgentOutputSchemaBase
from agents.handoffs import Handoff
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.model_settings import ModelSettings
from agents.models.interface import Model, ModelTracing
from agents.tool import Tool
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

NO_TRACING = RunConfig(tracing_disabled=True)


class ScriptedModel(Model):
    """A model that follows a script: each turn's function calls, then a final answer of every tool output it got.

    Attributes:
        tools_seen: The tool names the SDK offered on each turn.
        outputs: The tool outputs in the input of the last turn, in call order.
    """

    def __init__(self, *turns: list[tuple[str, dict[str, Any]]]) -> None:
        self.turns = list(turns)
        self.tools_seen: list[list[str]] = []
        self.outputs: list[str] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any | None,
    ) -> ModelResponse:
        self.tools_seen.append([tool.name for tool in tools])
        self.outputs = [_output_text(item) for item in input if _is_output(item)]
        if self.turns:
            calls = self.turns.pop(0)
            turn = len(self.tools_seen)
            return ModelResponse(
                output=[
                    ResponseFunctionToolCall(
                        type="function_call", call_id=f"call-{turn}-{i}", name=name, arguments=json.dumps(arguments)
                    )
                    for i, (name, arguments) in enumerate(calls)
                ],
                usage=Usage(),
                response_id=None,
            )
        text = ResponseOutputText(type="output_text", text=" | ".join(self.outputs), annotations=[])
        message = ResponseOutputMessage(
            id="final", type="message", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the scripted model answers Runner.run, not Runner.run_streamed")


def _is_output(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "function_call_output"


def _output_text(item: dict[str, Any]) -> str:
    output = item["output"]
    if isinstance(output, str):
        return output
    return "".join(part.get("text", "") for part in output)
