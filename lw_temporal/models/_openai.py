"""``OpenAIModel``: Chat Completions with native ``tool_calls`` and ``role: "tool"``.

Chat Completions is the API every OpenAI-compatible server speaks (vLLM, Ollama,
LiteLLM, ...), so one adapter serves them all through the client's ``base_url``. Each
turn sends the whole conversation: the system prompt, the task, each assistant message
with its ``tool_calls`` and one ``tool`` message per call bound by ``tool_call_id``.
The stable prefix lets the provider's automatic prompt caching apply.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import openai
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionAssistantMessageParam,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
)

from .._agent import ModelRequest, ModelResponse, StopReason, ToolCall, Usage
from .._agent._compaction import COMPACT_NOTE
from ._errors import provider_error, refused, sdk_error

KEY_VARIABLE = "OPENAI_API_KEY"
#: How a failed tool's result starts (Chat Completions has no is_error field).
ERROR_PREFIX = "ERROR: "


def openai_client(api_key: str, base_url: str | None = None) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key=api_key, base_url=base_url)


class OpenAIModel:
    """A Chat Completions model through the official ``openai`` SDK.

    Args:
        client: an ``openai.AsyncOpenAI`` (``base_url=`` for a compatible server).
        model: the model name, e.g. ``"gpt-5.5"`` or a local server's model id.
        max_tokens: output tokens per turn (sent as ``max_completion_tokens``); a reply
            cut there is continued next turn. ``None`` leaves it to the server.
        sdk_retries: retries inside the SDK. 0 by default: the activity's retry policy
            retries instead, after the provider's ``retry-after``, visibly in history.
        request_options: extra request fields (``temperature``, ``parallel_tool_calls``...).
    """

    def __init__(
        self,
        client: openai.AsyncOpenAI | None = None,
        model: str = "gpt-5.5",
        *,
        max_tokens: int | None = 8192,
        sdk_retries: int = 0,
        request_options: Mapping[str, Any] | None = None,
    ) -> None:
        base = client if client is not None else openai.AsyncOpenAI()
        self.client = base.with_options(max_retries=sdk_retries)
        self.model = model
        self.max_tokens = max_tokens
        self.request_options = dict(request_options or {})

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The Chat Completions request body of a turn."""
        tools: list[ChatCompletionFunctionToolParam] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in request.offered(native=False)
        ]
        body: dict[str, Any] = {
            **self.request_options,
            "model": self.model,
            "messages": openai_messages(request),
            "tools": tools,
        }
        if self.max_tokens is not None:
            body["max_completion_tokens"] = self.max_tokens
        return body

    async def next_turn(self, request: ModelRequest) -> ModelResponse:
        where = f"workflow {request.workflow_id!r}, turn {request.turn + 1}"
        try:
            completion = await self.client.chat.completions.create(**self.params(request))
        except (openai.APIStatusError, openai.APIConnectionError) as err:
            raise sdk_error(
                err, provider="OpenAI", model=self.model, where=where, key_variable=KEY_VARIABLE
            ) from None
        return self.response(completion, where)

    def response(self, completion: ChatCompletion, where: str) -> ModelResponse:
        if not completion.choices:
            raise provider_error(
                provider="OpenAI",
                model=self.model,
                where=where,
                status=502,
                message="the completion has no choices",
                headers={},
                key_variable=KEY_VARIABLE,
            )
        choice = completion.choices[0]
        message = choice.message
        if message.refusal or choice.finish_reason == "content_filter":
            raise refused(
                provider="OpenAI",
                model=self.model,
                where=where,
                detail=message.refusal or f"content filter ({choice.finish_reason})",
            )
        calls = []
        for call in message.tool_calls or []:
            if call.type != "function":
                continue
            try:
                arguments = json.loads(call.function.arguments or "{}")
                invalid = None if isinstance(arguments, dict) else call.function.arguments
            except (ValueError, RecursionError) as err:  # not JSON, or nested past the stack
                arguments, invalid = {}, f"{err}: {call.function.arguments[:200]!r}"
            calls.append(
                ToolCall(
                    id=call.id,
                    name=call.function.name,
                    arguments=arguments if isinstance(arguments, dict) else {},
                    invalid_arguments=invalid,
                )
            )
        cut = choice.finish_reason == "length"
        if cut and calls and calls[-1].invalid_arguments is not None:
            calls.pop()  # cut mid-arguments: the model repeats it next turn
        reason: StopReason = "max_tokens" if cut else "tool_use" if calls else "end_turn"
        usage = completion.usage
        cached = 0
        if usage is not None and usage.prompt_tokens_details is not None:
            cached = usage.prompt_tokens_details.cached_tokens or 0
        return ModelResponse(
            text=message.content or "",
            tool_calls=calls,
            stop_reason=reason,
            usage=Usage(
                input_tokens=usage.prompt_tokens if usage else 0,
                output_tokens=usage.completion_tokens if usage else 0,
                cached_tokens=cached,
                model_calls=1,
            ),
        )


def openai_messages(request: ModelRequest) -> list[ChatCompletionMessageParam]:
    """System, task, then per turn the assistant message and one tool message per call."""
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": request.system_prompt()},
        {"role": "user", "content": request.task or "Begin."},
    ]
    if request.summary:
        messages.append({"role": "user", "content": request.summary})
    for exchange in request.history:
        reply = exchange.reply
        said: ChatCompletionAssistantMessageParam = {"role": "assistant"}
        calls: list[ChatCompletionMessageFunctionToolCallParam] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in reply.tool_calls
        ]
        if calls:
            said["tool_calls"] = calls
            said["content"] = reply.text or None
        else:
            said["content"] = reply.text or "(no reply)"
        messages.append(said)
        for result in exchange.results:
            text = result.text or "(no output)"
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": result.call_id,
                    "content": f"{ERROR_PREFIX}{text}" if result.is_error else text,
                }
            )
        note = exchange.note or ("" if exchange.results else "(continue)")
        if note:
            messages.append({"role": "user", "content": note})
    if request.notes:
        messages.append({"role": "user", "content": "\n".join(request.notes)})
    if request.summarize:
        messages.append({"role": "user", "content": COMPACT_NOTE})
    return messages
