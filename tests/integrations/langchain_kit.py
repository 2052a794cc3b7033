"""The scripted chat model of the LangChain tests: imported by the tests that run it, not when they are collected."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult


class ScriptedChatModel(GenericFakeChatModel):
    """LangChain's fake chat model, taught to take tools: its script, then what it saw.

    Each turn plays the next scripted message (the tool calls); once the script is done it
    answers ``saw: `` and the content of every tool message in the conversation, joined by
    `` | ``. Streaming is off: the fake model streams no chunk for a tool-call message.
    """

    disable_streaming: bool = True

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        turn = next(self.messages, None)
        if turn is None:
            turn = "saw: " + " | ".join(str(m.content) for m in messages if isinstance(m, ToolMessage))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(turn) if isinstance(turn, str) else turn)])
