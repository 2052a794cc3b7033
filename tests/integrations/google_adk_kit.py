"""The scripted model of the Google ADK tests: imported by the tests that run it, not when they are collected."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from pydantic import Field

Call = tuple[str, dict[str, Any]]
"""A function call the scripted model makes: the tool's name and its arguments."""


class ScriptedModel(BaseLlm):
    """A model that calls ``calls`` one per turn, then answers with every tool response it saw, as JSON."""

    model: str = "scripted"
    calls: list[Call]
    requests: list[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        seen = [
            part.function_response.response
            for content in llm_request.contents
            for part in content.parts or []
            if part.function_response is not None
        ]
        if len(seen) < len(self.calls):
            name, args = self.calls[len(seen)]
            part = types.Part.from_function_call(name=name, args=args)
        else:
            part = types.Part.from_text(text=json.dumps(seen))
        yield LlmResponse(content=types.Content(role="model", parts=[part]))

    def offered(self) -> list[str]:
        """The tool names the first request offered the model."""
        return list(self.requests[0].tools_dict)
