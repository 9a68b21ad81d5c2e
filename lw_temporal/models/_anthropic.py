"""``AnthropicModel``: the Messages API with Claude's own tools and prompt caching.

Each turn sends the run's whole conversation as ``tool_use``/``tool_result`` blocks
bound by id (failed tools with ``is_error``) and the system prompt as ``system``. The
tools are the ones Claude is trained on where lw has them: bash (``bash_20250124``),
the text editor (``text_editor_20250728``) and the memory tool (``memory_20250818``),
each served by lw over the agent's scoped, versioned, audited mounts; the other tools
(``plan_workflow``, ``run_step``, ``finish``...) are function schemas.

Up to four ``cache_control`` breakpoints: the newest user message (where the next
turn's cache entry starts from), the previous one, the system prompt (tools included,
they come first) and, once results are cleared or turns compacted, the end of the part
that the previous turn sent too, so a clearing rewrites only what follows it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import anthropic
from anthropic.types import (
    CacheControlEphemeralParam,
    MemoryTool20250818Param,
    Message,
    MessageParam,
    TextBlockParam,
    ToolBash20250124Param,
    ToolParam,
    ToolResultBlockParam,
    ToolTextEditor20250728Param,
    ToolUnionParam,
    ToolUseBlockParam,
)
from temporalio.exceptions import ApplicationError

from .._agent import ModelRequest, ModelResponse, StopReason, ToolCall, ToolSpec, Usage
from .._agent._compaction import COMPACT_NOTE
from .._edit import VIEW_CHARS
from ..errors._kinds import MODEL_AUTH, MODEL_CONTEXT_OVERFLOW
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
        native_tools: send Claude's bash, text editor and memory tool (served over the
            agent's mounts) instead of lw's ``bash`` and ``memory_*`` function schemas.
        sdk_retries: retries inside the SDK. 0 by default: the activity's retry policy
            retries instead, after the provider's ``retry-after``, visibly in history.
        request_options: extra Messages API fields (``temperature``, ``top_p``,
            ``metadata``...). Not ``thinking``: with it on, the API wants each reply's
            thinking blocks sent back beside its tool results, and lw does not keep them,
            so the second turn would be refused; it is refused here instead.
    """

    def __init__(
        self,
        client: anthropic.AsyncAnthropic | None = None,
        model: str = "claude-sonnet-4-6",
        *,
        max_tokens: int = 8192,
        prompt_caching: bool = True,
        native_tools: bool = True,
        sdk_retries: int = 0,
        request_options: Mapping[str, Any] | None = None,
    ) -> None:
        thinking = (request_options or {}).get("thinking")
        if thinking is not None and not (
            isinstance(thinking, Mapping) and thinking.get("type") == "disabled"
        ):
            raise ValueError(
                "AnthropicModel(request_options={'thinking': ...}): extended thinking is not "
                "supported: with it on, the Messages API refuses a tool result unless the "
                "reply's thinking blocks are sent back with it, and lw does not keep them "
                "between turns; leave 'thinking' out of request_options"
            )
        base = client if client is not None else anthropic.AsyncAnthropic()
        self.client = base.with_options(max_retries=sdk_retries)
        self.model = model
        self.max_tokens = max_tokens
        self.prompt_caching = prompt_caching
        self.native_tools = native_tools
        self.request_options = dict(request_options or {})

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The Messages API request body of a turn."""
        native = self.native_tools
        tools = [_tool(t, native=native) for t in request.offered(native=native)]
        system: list[TextBlockParam] = [
            {"type": "text", "text": request.system_prompt(native_tools=native)}
        ]
        messages = anthropic_messages(request)
        if self.prompt_caching:
            _cache_breakpoints(tools, system, messages, request)
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
        except TypeError as err:
            # The SDK builds a client without a key and says so only here, as a TypeError
            # that a retry would meet again.
            if "authentication" not in str(err):
                raise
            raise ApplicationError(
                f"Anthropic {self.model!r} ({where}): no API key: set {KEY_VARIABLE} in the "
                "worker's environment, or pass client=anthropic.AsyncAnthropic(api_key=...)",
                type=MODEL_AUTH,
                non_retryable=True,
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


def _tool(spec: ToolSpec, *, native: bool) -> ToolUnionParam:
    """A tool as Claude gets it: its native type where it has one, else a schema."""
    if native and spec.native == "bash_20250124":
        bash: ToolBash20250124Param = {"type": "bash_20250124", "name": "bash"}
        return bash
    if native and spec.native == "text_editor_20250728":
        editor: ToolTextEditor20250728Param = {
            "type": "text_editor_20250728",
            "name": "str_replace_based_edit_tool",
            "max_characters": VIEW_CHARS,
        }
        return editor
    if native and spec.native == "memory_20250818":
        memory: MemoryTool20250818Param = {"type": "memory_20250818", "name": "memory"}
        return memory
    schema: ToolParam = {
        "name": spec.name, "description": spec.description, "input_schema": spec.parameters
    }  # fmt: skip
    return schema


def _text(text: str) -> str:
    """``text``, or nothing when it is only whitespace."""
    return text if text.strip() else ""


def anthropic_messages(request: ModelRequest) -> list[MessageParam]:
    """The task (and the summary of compacted turns), then per turn the assistant's
    blocks and the user's tool results."""
    # The API refuses a text block of only whitespace (400), which a task or a reply
    # can be ("\n\n" before a tool call): such text is left out, or stood in for.
    first: list[TextBlockParam] = [{"type": "text", "text": _text(request.task) or "Begin."}]
    if _text(request.summary):
        first.append({"type": "text", "text": request.summary})
    messages: list[MessageParam] = [{"role": "user", "content": first}]
    for exchange in request.history:
        reply = exchange.reply
        said: list[TextBlockParam | ToolUseBlockParam] = []
        if _text(reply.text):
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
                "content": _text(result.text) or "(no output)",
                "is_error": result.is_error,
            }
            for result in exchange.results
        ]
        if _text(exchange.note):
            answer.append({"type": "text", "text": exchange.note})
        if not answer:
            answer.append({"type": "text", "text": "(continue)"})
        messages.append({"role": "user", "content": answer})
    last = cast(list[Any], messages[-1]["content"])
    if request.notes:
        last.append({"type": "text", "text": "\n".join(request.notes)})
    if request.summarize:
        last.append({"type": "text", "text": COMPACT_NOTE})
    return messages


def _cache_breakpoints(
    tools: list[ToolUnionParam],
    system: list[TextBlockParam],
    messages: list[MessageParam],
    request: ModelRequest,
) -> None:
    """At most four breakpoints, the most useful first: the newest user message (where
    next turn's entry starts from), the end of what the previous turn sent unchanged
    when a clearing or a compaction changed what follows (its entry is read instead of
    rewriting everything before it), the previous user message (where last turn's
    entry ends) and the system prompt, else the tools."""
    users = [cast(list[dict[str, Any]], m["content"]) for m in messages if m["role"] == "user"]
    picked: list[dict[str, Any]] = [users[-1][-1]]
    stable = _stable_block(users, request)
    if stable is not None:
        picked.append(stable)
    if len(users) > 1:
        picked.append(users[-2][-1])
    picked.append(cast(dict[str, Any], system[-1]))
    if tools:
        picked.append(cast(dict[str, Any], tools[-1]))
    marked: list[int] = []
    for block in picked:
        if id(block) not in marked and len(marked) < MAX_CACHE_BREAKPOINTS:
            block["cache_control"] = _EPHEMERAL
            marked.append(id(block))


def _stable_block(
    users: list[list[dict[str, Any]]], request: ModelRequest
) -> dict[str, Any] | None:
    """The last block the previous turn sent exactly as this one: the last result it
    had cleared already, or the task (and summary) when none was."""
    if request.stable_results == 0:
        return users[0][-1] if request.summary or request.cleared_results else None
    seen = 0
    for blocks in users[1:]:
        for block in blocks:
            if block.get("type") == "tool_result":
                seen += 1
                if seen == request.stable_results:
                    return block
    return None
