"""Strict stand-ins of the Anthropic Messages and OpenAI Chat Completions APIs.

The official SDK clients talk to them over ``httpx2.MockTransport`` (no network, no
key). Each request is checked against the SDK's own request types (every object's keys
and values) and against the tool protocol: each tool call answered by id in the next
message and nowhere else, nothing sent back as text, at most four cache breakpoints. A
request that breaks a rule gets the provider's 400 and is recorded in ``violations``.
Answers are the saved responses in ``tests/data/providers/`` (the providers' documented
wire format) with their content filled in by a ``Brain``: usually a ``ScriptedModel``
reading a ``ModelRequest`` rebuilt from the wire, so the sample scripts drive the
real adapters end to end.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import anthropic
import httpx2
import openai
from anthropic.types import (
    MemoryTool20250818Param,
    TextBlockParam,
    ToolBash20250124Param,
    ToolParam,
    ToolResultBlockParam,
    ToolTextEditor20250728Param,
    ToolUseBlockParam,
)
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionSystemMessageParam,
    ChatCompletionToolMessageParam,
    ChatCompletionUserMessageParam,
)
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from pydantic import TypeAdapter, ValidationError

from lw_temporal import ModelRequest, ModelResponse, Role, ToolCall
from lw_temporal._agent import Exchange
from lw_temporal._agent._compaction import COMPACT_NOTE
from lw_temporal.ids import parse_workflow_id
from lw_temporal.models import ToolResult

DATA = Path(__file__).parent / "data" / "providers"
Brain = Callable[[ModelRequest], Awaitable[ModelResponse]]
_RUN = re.compile(r"You are the (\w+) agent of run (\S+)\. You act")
#: Words that would mean a tool call or result travelled as chat text.
_AS_TEXT = ('"tool_use"', '"tool_calls"', '"arguments":', "[bash ok]", "[bash error]")
#: Claude's client tools as the Messages API documents them: type -> (name, shape).
NATIVE_TOOLS: dict[str, tuple[str, Any]] = {
    "bash_20250124": ("bash", ToolBash20250124Param),
    "text_editor_20250728": ("str_replace_based_edit_tool", ToolTextEditor20250728Param),
    "memory_20250818": ("memory", MemoryTool20250818Param),
}


def saved(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / name).read_text())
    return data


@functools.cache
def _adapter(schema: Any) -> TypeAdapter[Any]:
    return TypeAdapter(schema)


def strict(value: object, schema: Any, where: str) -> list[str]:
    """``value`` against an SDK TypedDict: no unknown key, every value well typed."""
    if not isinstance(value, dict):
        return [f"{where}: not an object: {value!r:.80}"]
    allowed = set(schema.__required_keys__) | set(schema.__optional_keys__)
    problems = [f"{where}: unknown field {k!r}" for k in value if k not in allowed]
    try:
        _adapter(schema).validate_python(value, strict=False)
    except ValidationError as err:
        problems.append(f"{where}: {err}".replace("\n", " ")[:400])
    return problems


@dataclass
class Fault:
    status: int
    body: str
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass
class StandIn:
    brain: Brain
    #: Request index (0-based) -> the error answered instead, once.
    faults: dict[int, Fault] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    def transport(self) -> httpx2.MockTransport:
        return httpx2.MockTransport(self.handle)

    async def handle(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        index = len(self.requests)
        self.requests.append(body)
        fault = self.faults.pop(index, None)
        if fault is not None:
            return httpx2.Response(
                fault.status, headers=dict(fault.headers), content=saved_text(fault.body)
            )
        problems = self.check(request, body)
        if problems:
            self.violations += [f"request {index}: {p}" for p in problems]
            return self.invalid("; ".join(problems)[:2000])
        return httpx2.Response(200, json=self.answer(await self.brain(self.understand(body))))

    # -- per provider ----------------------------------------------------------------
    def check(self, request: httpx2.Request, body: dict[str, Any]) -> list[str]:
        raise NotImplementedError

    def understand(self, body: dict[str, Any]) -> ModelRequest:
        raise NotImplementedError

    def answer(self, response: ModelResponse) -> dict[str, Any]:
        raise NotImplementedError

    def invalid(self, message: str) -> httpx2.Response:
        raise NotImplementedError

    # -- shared ------------------------------------------------------------------------
    def rebuilt(
        self,
        system: str,
        task: str,
        turns: list[tuple[ModelResponse, list[ToolResult]]],
        *,
        summary: str = "",
        summarize: bool = False,
    ) -> ModelRequest:
        """The ModelRequest a script sees, read back from the wire."""
        match = _RUN.search(system)
        assert match is not None, system[:200]
        role, workflow_id = Role(match.group(1)), match.group(2)
        return ModelRequest(
            role=role,
            workflow_id=workflow_id,
            definition_id=parse_workflow_id(workflow_id).definition_id,
            turn=len(turns),
            max_turns=1000,
            mounts=system,
            instructions="",
            task=task,
            history=[
                Exchange(turn=i, reply=reply, results=results)
                for i, (reply, results) in enumerate(turns)
            ],
            tools=[],
            summary=summary,
            summarize=summarize,
        )


def saved_text(name: str) -> bytes:
    return (DATA / name).read_bytes()


def _as_text(text: str, where: str) -> list[str]:
    return [f"{where}: a tool call or result sent as text" for w in _AS_TEXT if w in text]


class AnthropicStandIn(StandIn):
    """``POST /v1/messages`` as documented, strict about what it accepts."""

    def client(self) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            api_key="test-key",
            base_url="http://anthropic.standin",
            http_client=httpx2.AsyncClient(transport=self.transport()),
        )

    def invalid(self, message: str) -> httpx2.Response:
        body = saved("anthropic_error.json")
        body["error"]["message"] = message
        return httpx2.Response(400, json=body)

    def check(self, request: httpx2.Request, body: dict[str, Any]) -> list[str]:
        problems: list[str] = []
        key = request.headers.get("x-api-key") or request.headers.get("authorization")
        if request.url.path != "/v1/messages" or not key:
            problems.append(f"not an authenticated messages call: {request.url.path}")
        if not request.headers.get("anthropic-version"):
            problems.append("no anthropic-version header")
        shallow = {k: v for k, v in body.items() if k not in ("messages", "tools", "system")}
        problems += strict({**shallow, "messages": []}, MessageCreateParamsNonStreaming, "request")
        for i, tool in enumerate(body.get("tools", [])):
            problems += self._tool(tool, f"tools[{i}]")
        system = body.get("system", [])
        for i, block in enumerate(system if isinstance(system, list) else []):
            problems += strict(block, TextBlockParam, f"system[{i}]")
        messages = body.get("messages", [])
        problems += self._protocol(messages)
        marks = sum("cache_control" in t for t in body.get("tools", []))
        marks += sum("cache_control" in b for b in system if isinstance(b, dict))
        marks += sum(
            "cache_control" in b
            for m in messages
            if isinstance(m.get("content"), list)
            for b in m["content"]
        )
        if marks > 4:
            problems.append(f"{marks} cache_control breakpoints (at most 4)")
        return problems

    @staticmethod
    def _tool(tool: dict[str, Any], where: str) -> list[str]:
        """A client tool: one of Claude's own (its type and fixed name, nothing else),
        or a custom tool with a schema."""
        kind = tool.get("type")
        if kind is None or kind == "custom":
            return strict(tool, ToolParam, where)
        if kind not in NATIVE_TOOLS:
            return [f"{where}: unknown tool type {kind!r}"]
        name, shape = NATIVE_TOOLS[kind]
        problems = strict(tool, shape, where)
        if tool.get("name") != name:
            problems.append(f"{where}: {kind} must be named {name!r}, not {tool.get('name')!r}")
        return problems

    def _protocol(self, messages: list[dict[str, Any]]) -> list[str]:
        problems: list[str] = []
        kinds = {
            "text": TextBlockParam,
            "tool_use": ToolUseBlockParam,
            "tool_result": ToolResultBlockParam,
        }
        asked: set[str] = set()
        seen_ids: set[str] = set()
        for i, message in enumerate(messages):
            role = message.get("role")
            if role != ("user" if i % 2 == 0 else "assistant"):
                problems.append(f"messages[{i}]: role {role!r} out of turn")
            content = message.get("content")
            if not isinstance(content, list) or not content:
                problems.append(f"messages[{i}]: content must be a non-empty block list")
                continue
            answered = [b.get("tool_use_id") for b in content if b.get("type") == "tool_result"]
            leading = 0
            while leading < len(content) and content[leading].get("type") == "tool_result":
                leading += 1
            if leading != len(answered):
                problems.append(f"messages[{i}]: tool_result blocks must come first")
            if set(answered) != asked or len(answered) != len(asked):
                problems.append(
                    f"messages[{i}]: answers {sorted(map(str, answered))} to calls {sorted(asked)}"
                )
            asked = set()
            for j, block in enumerate(content):
                kind = kinds.get(block.get("type"))
                if kind is None:
                    problems.append(f"messages[{i}][{j}]: unexpected block {block.get('type')}")
                    continue
                problems += strict(block, kind, f"messages[{i}][{j}]")
                if block.get("type") == "text":
                    if not str(block.get("text", "")).strip():  # the API's 400
                        problems.append(
                            f"messages[{i}][{j}]: text content blocks must contain "
                            "non-whitespace text"
                        )
                    problems += _as_text(block.get("text", ""), f"messages[{i}][{j}]")
                if block.get("type") == "tool_use":
                    if role != "assistant" or block["id"] in seen_ids:
                        problems.append(f"messages[{i}][{j}]: bad tool_use id {block['id']}")
                    asked.add(block["id"])
                    seen_ids.add(block["id"])
        if asked:
            problems.append("the conversation ends with unanswered tool calls")
        return problems

    def understand(self, body: dict[str, Any]) -> ModelRequest:
        system = "".join(b["text"] for b in body["system"])
        messages = body["messages"]
        opening = [b.get("text", "") for b in messages[0]["content"]]
        task, summary = opening[0], "".join(opening[1:])
        closing = messages[-1]["content"]
        summarize = any(b.get("text") == COMPACT_NOTE for b in closing)
        turns: list[tuple[ModelResponse, list[ToolResult]]] = []
        for i in range(1, len(messages), 2):
            blocks = messages[i]["content"]
            calls = [
                ToolCall(id=b["id"], name=b["name"], arguments=b["input"])
                for b in blocks
                if b["type"] == "tool_use"
            ]
            names = {c.id: c.name for c in calls}
            text = "".join(b.get("text", "") for b in blocks if b["type"] == "text")
            answer = messages[i + 1]["content"] if i + 1 < len(messages) else []
            results = [
                ToolResult(
                    call_id=b["tool_use_id"],
                    tool=names.get(b["tool_use_id"], "?"),
                    turn=len(turns),
                    text=str(b.get("content", "")),
                    is_error=bool(b.get("is_error")),
                )
                for b in answer
                if b["type"] == "tool_result"
            ]
            turns.append((ModelResponse(text=text, tool_calls=calls), results))
        return self.rebuilt(system, task, turns, summary=summary, summarize=summarize)

    def answer(self, response: ModelResponse) -> dict[str, Any]:
        body = copy.deepcopy(saved("anthropic_message.json"))
        n = len(self.requests)
        body["id"] = f"msg_{n:06d}"
        content: list[dict[str, Any]] = []
        if response.text:
            content.append({"type": "text", "text": response.text})
        for i, call in enumerate(response.tool_calls):
            content.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{n:04d}_{i}",
                    "name": call.name,
                    "input": call.arguments,
                }
            )
        body["content"] = content or [{"type": "text", "text": "done"}]
        body["stop_reason"] = (
            response.stop_reason
            if response.stop_reason in ("max_tokens", "refusal")
            else "tool_use"
            if response.tool_calls
            else "end_turn"
        )
        return body


class OpenAIStandIn(StandIn):
    """``POST /v1/chat/completions`` as documented, strict about what it accepts."""

    def client(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            api_key="test-key",
            base_url="http://openai.standin/v1",
            http_client=httpx2.AsyncClient(transport=self.transport()),
        )

    def invalid(self, message: str) -> httpx2.Response:
        body = saved("openai_error.json")
        body["error"].update(message=message, code="invalid_request", param=None)
        return httpx2.Response(400, json=body)

    def check(self, request: httpx2.Request, body: dict[str, Any]) -> list[str]:
        problems: list[str] = []
        if request.url.path != "/v1/chat/completions":
            problems.append(f"not a chat completions call: {request.url.path}")
        if not request.headers.get("authorization", "").startswith("Bearer "):
            problems.append("no bearer key")
        shallow = {k: v for k, v in body.items() if k not in ("messages", "tools")}
        problems += strict(
            {**shallow, "messages": []}, CompletionCreateParamsNonStreaming, "request"
        )
        for i, tool in enumerate(body.get("tools", [])):
            problems += strict(tool, ChatCompletionFunctionToolParam, f"tools[{i}]")
        return problems + self._protocol(body.get("messages", []))

    def _protocol(self, messages: list[dict[str, Any]]) -> list[str]:
        problems: list[str] = []
        kinds: dict[str, Any] = {
            "system": ChatCompletionSystemMessageParam,
            "user": ChatCompletionUserMessageParam,
            "assistant": ChatCompletionAssistantMessageParam,
            "tool": ChatCompletionToolMessageParam,
        }
        if [m.get("role") for m in messages[:2]] != ["system", "user"]:
            problems.append("the conversation must start with the system prompt and the task")
        pending: set[str] = set()
        seen: set[str] = set()
        for i, message in enumerate(messages):
            role = message.get("role")
            kind = kinds.get(cast(str, role))
            if kind is None:
                problems.append(f"messages[{i}]: unexpected role {role!r}")
                continue
            problems += strict(message, kind, f"messages[{i}]")
            if role == "tool":
                call_id = message.get("tool_call_id")
                if call_id not in pending:
                    problems.append(f"messages[{i}]: answers {call_id!r}, which is not pending")
                pending.discard(cast(str, call_id))
                continue
            if pending:
                problems.append(f"messages[{i}]: calls {sorted(pending)} were not answered")
                pending = set()
            content = message.get("content")
            if isinstance(content, str):
                problems += _as_text(content, f"messages[{i}]")
            for j, call in enumerate(message.get("tool_calls") or []):
                problems += strict(
                    call,
                    ChatCompletionMessageFunctionToolCallParam,
                    f"messages[{i}].tool_calls[{j}]",
                )
                try:
                    if not isinstance(json.loads(call["function"]["arguments"]), dict):
                        raise ValueError
                except (ValueError, KeyError, TypeError):
                    problems.append(f"messages[{i}].tool_calls[{j}]: arguments not a JSON object")
                if call.get("id") in seen:
                    problems.append(f"messages[{i}].tool_calls[{j}]: id used twice")
                pending.add(call.get("id"))
                seen.add(call.get("id"))
        if pending:
            problems.append("the conversation ends with unanswered tool calls")
        return problems

    def understand(self, body: dict[str, Any]) -> ModelRequest:
        messages = body["messages"]
        turns: list[tuple[ModelResponse, list[ToolResult]]] = []
        names: dict[str, str] = {}
        for message in messages[2:]:
            if message["role"] == "assistant":
                calls = [
                    ToolCall(
                        id=c["id"],
                        name=c["function"]["name"],
                        arguments=json.loads(c["function"]["arguments"]),
                    )
                    for c in message.get("tool_calls") or []
                ]
                names.update({c.id: c.name for c in calls})
                turns.append(
                    (ModelResponse(text=message.get("content") or "", tool_calls=calls), [])
                )
            elif message["role"] == "tool":
                text = message["content"]
                turns[-1][1].append(
                    ToolResult(
                        call_id=message["tool_call_id"],
                        tool=names.get(message["tool_call_id"], "?"),
                        turn=len(turns) - 1,
                        text=text.removeprefix("ERROR: "),
                        is_error=text.startswith("ERROR: "),
                    )
                )
        summary = ""
        if len(messages) > 2 and messages[2]["role"] == "user":
            summary = messages[2]["content"]
        summarize = messages[-1]["role"] == "user" and messages[-1]["content"] == COMPACT_NOTE
        return self.rebuilt(
            messages[0]["content"], messages[1]["content"], turns, summary=summary,
            summarize=summarize,
        )  # fmt: skip

    def answer(self, response: ModelResponse) -> dict[str, Any]:
        body = copy.deepcopy(saved("openai_chat_completion.json"))
        n = len(self.requests)
        body["id"] = f"chatcmpl-{n:06d}"
        choice = body["choices"][0]
        message = choice["message"]
        message["content"] = response.text or None
        message["tool_calls"] = [
            {
                "id": f"call_{n:04d}_{i}",
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
            }
            for i, c in enumerate(response.tool_calls)
        ] or None
        if response.stop_reason == "refusal":
            message["refusal"] = response.text or "I can't help with that."
        choice["finish_reason"] = (
            "length"
            if response.stop_reason == "max_tokens"
            else "tool_calls"
            if response.tool_calls
            else "stop"
        )
        return body
