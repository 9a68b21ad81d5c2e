"""``AnthropicModel``: the Messages API with native tool use and prompt caching.

Each turn sends the run's whole conversation as ``tool_use``/``tool_result`` blocks
bound by id (failed tools with ``is_error``), the system prompt as ``system``, and up
to four ``cache_control`` breakpoints (the tools, the system prompt, the previous and
the newest user message), so a turn pays full price only for what is new.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import anthropic
from anthropic.types import (
    CacheControlEphemeralParam,
    Message,
    MessageParam,
    TextBlockParam,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlockParam,
)
from temporalio.exceptions import ApplicationError

from .._agent import ModelRequest, ModelResponse, StopReason, ToolCall, Usage
from .._errors import MODEL_CONTEXT_OVERFLOW
from ._errors import refused, sdk_error

KEY_VARIABLE = "ANTHROPIC_API_KEY"
#: Anthropic's limit on cache_control breakpoints in one request.
MAX_CACHE_BREAKPOINTS = 4
_EPHEMERAL: CacheControlEphemeralParam = {"type": "ephemeral"}


def anthropic_client(api_key: str, base_url: str | None = None) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url)


class AnthropicModel:
    """Claude through the official ``anthropic`` SDK.

    Args:
        client: an ``anthropic.AsyncAnthropic`` (its key from the worker's environment).
        model: the model name, e.g. ``"claude-sonnet-4-6"``.
        max_tokens: output tokens per turn; a reply cut there is continued next turn.
        prompt_caching: put ``cache_control`` breakpoints on tools, system and the
            conversation's growing prefix.
        sdk_retries: retries inside the SDK. 0 by default: the activity's retry policy
            retries instead, after the provider's ``retry-after``, visibly in history.
        request_options: extra Messages API fields (``temperature``, ``thinking``, ...).
    """

    def __init__(
        self,
        client: anthropic.AsyncAnthropic | None = None,
        model: str = "claude-sonnet-4-6",
        *,
        max_tokens: int = 8192,
        prompt_caching: bool = True,
        sdk_retries: int = 0,
        request_options: Mapping[str, Any] | None = None,
    ) -> None:
        base = client if client is not None else anthropic.AsyncAnthropic()
        self.client = base.with_options(max_retries=sdk_retries)
        self.model = model
        self.max_tokens = max_tokens
        self.prompt_caching = prompt_caching
        self.request_options = dict(request_options or {})

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The Messages API request body of a turn."""
        tools: list[ToolParam] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
        system: list[TextBlockParam] = [{"type": "text", "text": request.system_prompt()}]
        messages = anthropic_messages(request)
        if self.prompt_caching:
            _cache_breakpoints(tools, system, messages)
        return {
            **self.request_options,
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": system,
            "tools": tools,
            "messages": messages,
        }

    async def next_turn(self, request: ModelRequest) -> ModelResponse:
        where = f"workflow {request.workflow_id!r}, turn {request.turn + 1}"
        try:
            message = await self.client.messages.create(**self.params(request))
        except (anthropic.APIStatusError, anthropic.APIConnectionError) as err:
            raise sdk_error(
                err, provider="Anthropic", model=self.model, where=where, key_variable=KEY_VARIABLE
            ) from None
        return self.response(message, where)

    def response(self, message: Message, where: str) -> ModelResponse:
        text = "".join(b.text for b in message.content if b.type == "text")
        blocks = list(message.content)
        stop = message.stop_reason
        if stop == "refusal":
            category = message.stop_details.category if message.stop_details else None
            raise refused(
                provider="Anthropic",
                model=self.model,
                where=where,
                detail=(f"[{category}] " if category else "") + text,
            )
        if stop == "model_context_window_exceeded":
            raise ApplicationError(
                f"Anthropic {self.model!r} ({where}): the conversation filled the model's "
                "context window; lower the plugin's ModelCallOptions.context_budget_tokens",
                type=MODEL_CONTEXT_OVERFLOW,
                non_retryable=True,
            )
        if stop == "max_tokens" and blocks and blocks[-1].type == "tool_use":
            blocks.pop()  # its input may be cut short: the model repeats it next turn
        calls = [
            ToolCall(id=b.id, name=b.name, arguments=dict(b.input))
            for b in blocks
            if b.type == "tool_use"
        ]
        reason: StopReason = (
            "max_tokens" if stop in ("max_tokens", "pause_turn") else
            "tool_use" if calls else "end_turn"
        )  # fmt: skip
        usage = message.usage
        cached = usage.cache_read_input_tokens or 0
        written = usage.cache_creation_input_tokens or 0
        return ModelResponse(
            text=text,
            tool_calls=calls,
            stop_reason=reason,
            usage=Usage(
                input_tokens=usage.input_tokens + cached + written,
                output_tokens=usage.output_tokens,
                cached_tokens=cached,
                cache_write_tokens=written,
                model_calls=1,
            ),
        )


def anthropic_messages(request: ModelRequest) -> list[MessageParam]:
    """The task, then per turn the assistant's blocks and the user's tool results."""
    first: list[TextBlockParam] = [{"type": "text", "text": request.task or "Begin."}]
    messages: list[MessageParam] = [{"role": "user", "content": first}]
    for exchange in request.history:
        reply = exchange.reply
        said: list[TextBlockParam | ToolUseBlockParam] = []
        if reply.text:
            said.append({"type": "text", "text": reply.text})
        for call in reply.tool_calls:
            said.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
            )
        if not said:
            said.append({"type": "text", "text": "(no reply)"})
        messages.append({"role": "assistant", "content": said})
        answer: list[ToolResultBlockParam | TextBlockParam] = [
            {
                "type": "tool_result",
                "tool_use_id": result.call_id,
                "content": result.text or "(no output)",
                "is_error": result.is_error,
            }
            for result in exchange.results
        ]
        if exchange.note:
            answer.append({"type": "text", "text": exchange.note})
        if not answer:
            answer.append({"type": "text", "text": "(continue)"})
        messages.append({"role": "user", "content": answer})
    if request.notes:
        last = cast(list[Any], messages[-1]["content"])
        last.append({"type": "text", "text": "\n".join(request.notes)})
    return messages


def _cache_breakpoints(
    tools: list[ToolParam], system: list[TextBlockParam], messages: list[MessageParam]
) -> None:
    """Tools, system, and the last block of the newest and of the previous user
    message: the previous one is where last turn's cache entry ends, the newest is
    where next turn's will start from."""
    if tools:
        tools[-1]["cache_control"] = _EPHEMERAL
    system[-1]["cache_control"] = _EPHEMERAL
    users = [m for m in messages if m["role"] == "user"]
    for message in users[-(MAX_CACHE_BREAKPOINTS - 2) :]:
        blocks = cast(list[dict[str, Any]], message["content"])
        blocks[-1]["cache_control"] = _EPHEMERAL
