"""A model's reply is untrusted input: made storable and bounded before anything keeps it.

``lw.model`` has paid for the reply by the time it holds it, and the reply must then be
written to the turn file, returned through Temporal (JSON, UTF-8) and read by workflow
code. Valid JSON from a provider can still hold what none of those can carry (a lone
surrogate such as ``"\\ud800"``, NaN), or more than a workflow history should (a 10 MB
argument, nesting 10,000 deep, thousands of calls). Failing the activity there would
retry it, paying for the same reply again, and then fail the run. So the reply is
normalized here, once: every call keeps its place and its id (the protocols need an
answer per call), and a call whose arguments cannot be kept is emptied and marked
(``ToolCall.invalid_arguments``), which the agent loop answers with an error result the
model reads, naming what was wrong and how to send it instead.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ._protocol import ModelResponse, ToolCall, Usage

#: UTF-8 bytes of a reply's text kept (tool-call arguments are bounded below).
REPLY_TEXT_CAP = 32 * 1024
#: UTF-8 bytes of one call's arguments as JSON: larger content goes in parts.
ARGUMENTS_CAP = 256 * 1024
#: Nesting of one call's arguments (objects and arrays).
ARGUMENTS_DEPTH = 32
#: Values (strings, numbers, items...) in one call's arguments.
ARGUMENTS_VALUES = 50_000
#: Tool calls one reply may make; the rest are dropped and the reply says so.
MAX_TOOL_CALLS = 128
#: Characters of a tool name, an adapter's note on unusable arguments.
NAME_CAP = 128
NOTE_CAP = 300

_SAFE_ID = re.compile(r"[^A-Za-z0-9_-]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate (which UTF-8 cannot encode) replaced by U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def _cut(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    return text if len(data) <= limit else data[:limit].decode("utf-8", "ignore")


def _where(path: list[str]) -> str:
    return "arguments" + "".join(path)


def _unusable(arguments: dict[str, Any]) -> str | None:
    """Why ``arguments`` cannot be stored and sent on as JSON, or None. Iterative, so
    no nesting depth can exhaust the stack."""
    stack: list[tuple[Any, list[str], int]] = [(arguments, [], 1)]
    values = 0
    while stack:
        value, path, depth = stack.pop()
        values += 1
        if values > ARGUMENTS_VALUES:
            return f"hold more than {ARGUMENTS_VALUES} values; send the data as one string"
        if isinstance(value, dict | list) and depth > ARGUMENTS_DEPTH:
            return (
                f"are nested more than {ARGUMENTS_DEPTH} deep (at {_where(path)}); send flat "
                "values, e.g. the content as one string"
            )
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    return f"have a key that is not a string at {_where(path)}"
                if _SURROGATE.search(key):
                    return _surrogate_note([*path, f"[{clean_text(key)!r}]"])
                stack.append((item, [*path, f"[{clean_text(key)[:40]!r}]"], depth + 1))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                stack.append((item, [*path, f"[{index}]"], depth + 1))
        elif isinstance(value, str):
            if _SURROGATE.search(value):
                return _surrogate_note(path)
        elif isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")):
                return f"hold {value} at {_where(path)}, which JSON cannot carry; send a number"
        elif value is not None and not isinstance(value, bool | int):
            return f"hold a {type(value).__name__} at {_where(path)}, which is not JSON"
    size = len(json.dumps(arguments, ensure_ascii=False).encode("utf-8"))
    if size > ARGUMENTS_CAP:
        return (
            f"are {size} bytes of JSON, over the {ARGUMENTS_CAP}-byte limit of one call; "
            "write large content in parts (memory_write, then memory_append) or with bash"
        )
    return None


def _surrogate_note(path: list[str]) -> str:
    return (
        f"hold a lone surrogate (an unpaired \\ud800-\\udfff escape) at {_where(path)}, "
        "which no UTF-8 text can carry; send the text as valid Unicode"
    )


def _call(call: ToolCall, index: int, turn: int, seen: set[str]) -> ToolCall:
    call_id = _SAFE_ID.sub("_", call.id)[:64] or f"call_{turn}_{index}"
    base, suffix = call_id[:56], index
    while call_id in seen:  # a made-up id may be one the reply gave a later or earlier call
        call_id = f"{base}_{suffix}"
        suffix += 1
    seen.add(call_id)
    name = _cut(clean_text(call.name), NAME_CAP) or "(unnamed)"
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    invalid = call.invalid_arguments
    if invalid is not None:
        invalid = f"are not a JSON object: {_cut(clean_text(invalid), NOTE_CAP)}"
    else:
        try:
            invalid = _unusable(arguments)
        except (TypeError, ValueError, RecursionError) as err:
            invalid = f"cannot be read as JSON ({type(err).__name__})"
    if invalid is not None:
        arguments = {}
    return ToolCall(name=name, arguments=arguments, id=call_id, invalid_arguments=invalid)


def normalized(response: ModelResponse, turn: int) -> ModelResponse:
    """The reply as it can be kept: ids on every call (unique within the reply), names
    and text valid UTF-8 and bounded, unusable arguments marked, at most
    ``MAX_TOOL_CALLS`` calls, one model call counted."""
    seen: set[str] = set()
    calls = [_call(c, i, turn, seen) for i, c in enumerate(response.tool_calls[:MAX_TOOL_CALLS])]
    text = _cut(clean_text(response.text), REPLY_TEXT_CAP)
    dropped = len(response.tool_calls) - len(calls)
    if dropped > 0:
        text += (
            f"\n[{dropped} more tool calls were dropped: at most {MAX_TOOL_CALLS} run per "
            "reply; ask for the rest in your next reply]"
        )
    usage = response.usage
    if usage.model_calls == 0:
        usage = usage + Usage(model_calls=1)
    return ModelResponse(text=text, tool_calls=calls, stop_reason=response.stop_reason, usage=usage)
