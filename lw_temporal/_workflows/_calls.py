"""Answering the model's tool calls, a mixin of the agent loop (``_loop._Agent``): each
call as an activity (``_execute`` is every call site of the loop's activities), checked
first against the role's tools and the call's arguments, a run approved by a person at
most once; consecutive calls of a child-starting tool together (``_children``)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ValidationError
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

from .._agent import (
    Exchange,
    Tool,
    ToolCall,
    ToolKind,
    ToolResult,
    tool_for,
    tools_for,
)
from .._agent._recorder import digest, tool_activity_id
from .._agent._tools import RESULT_CAP, TASK_CAP, FinishArgs, clip
from .._approvals._gate import Approvals, at_most_once
from .._telemetry._summary import tool_summary
from .._topology import placement, placement_failure
from ._children import ChildStarts, failure_text

# Every lw failure kind that no retry can fix marks itself non-retryable (lw_error), so
# the policy lists none: the list would repeat ~500 bytes on every scheduled activity.
_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=5,
)

#: An approved call runs at most once: a person approved one run of it, and a retry
#: after a lost attempt (a worker killed mid-command) could run it a second time.
_ONCE = RetryPolicy(maximum_attempts=1)


class ToolCalls(ChildStarts, Approvals):
    """Tool calls of one agent (what it reads of the loop is declared here)."""

    _status: str
    _running: list[str]
    _digests: dict[str, str]

    # -- activities (every call site of the loop goes through _execute) ------------
    async def _execute(
        self,
        name: str,
        argument: BaseModel | None,
        result_type: type[Any],
        *,
        start_to_close: timedelta,
        heartbeat: timedelta | None = None,
        local: bool = False,
        summary: str | None = None,
        activity_id: str | None = None,
        once: bool = False,
    ) -> Any:
        args = [] if argument is None else [argument]
        if local:
            try:
                return await workflow.execute_local_activity(
                    name,
                    args=args,
                    result_type=result_type,
                    start_to_close_timeout=start_to_close,
                    retry_policy=_RETRY,
                    summary=summary,
                )
            except (ActivityError, ApplicationError) as err:
                if fatal := placement_failure(err, None):
                    raise fatal from None
                raise
        # A pinned tree's activities run on the host that holds its scratch.
        pin = self._state.settings.pin if self._state.settings else None
        try:
            return await workflow.execute_activity(
                name,
                args=args,
                result_type=result_type,
                start_to_close_timeout=start_to_close,
                heartbeat_timeout=heartbeat,
                retry_policy=_ONCE if once else _RETRY,
                summary=summary,
                activity_id=activity_id,
                **placement(pin),
            )
        except ActivityError as err:
            if fatal := placement_failure(err, pin):
                raise fatal from None
            raise

    def _record(self, exchange: Exchange, result: ToolResult) -> None:
        exchange.results.append(result)
        if result.is_error:
            self._state.failed_tools += 1

    async def _act(self, exchange: Exchange) -> str | None:
        """Run the reply's tool calls in order (consecutive child starts together);
        return the summary if the model finished (``finish``, or no tool call at all)."""
        reply = exchange.reply
        calls = reply.tool_calls
        if not calls:
            self._running = []
            if reply.stop_reason == "max_tokens":
                return None  # cut off mid-thought: the next turn asks it to go on
            # A model that answers without calling a tool is done, as in every chat
            # API's tool loop; its text is the summary.
            return reply.text or "finished"
        self._gate.open(calls, exchange.turn, self._state)
        index = 0
        self._turn_children = 0
        while index < len(calls):
            call = calls[index]
            spec = tool_for(self.role, call.name)
            if spec is not None and spec.kind is ToolKind.FINISH:
                self._running = []
                try:
                    summary = FinishArgs.model_validate(call.arguments).summary
                except ValidationError:
                    summary = clip(str(call.arguments.get("summary", "")), TASK_CAP)
                return summary or reply.text or "finished"
            if spec is not None and spec.kind is ToolKind.CHILD:
                group: list[ToolCall] = []
                first = index
                while index < len(calls) and calls[index].name == call.name:
                    group.append(calls[index])
                    index += 1
                allowed = []
                verdicts = await self._verdicts(range(first, index))
                for child, verdict in zip(group, verdicts, strict=True):
                    if verdict is None or verdict.runs:
                        allowed.append(child)
                    else:
                        text = verdict.text
                        self._record(exchange, self._result(child, exchange.turn, text, error=True))
                self._status = "waiting for children"
                self._running = [f"{len(allowed)} x {call.name}"]
                for result in await asyncio.gather(*self._start_children(allowed, exchange.turn)):
                    self._record(exchange, result)
                continue
            [verdict] = await self._verdicts([index])
            if verdict is not None and not verdict.runs:
                text = verdict.text
                self._record(exchange, self._result(call, exchange.turn, text, error=True))
            else:
                self._status = "running tools"
                self._running = [call.name]
                # The memory tools' ledger makes their retries exactly-once already.
                once = verdict is not None and not call.name.startswith("memory_")
                self._record(exchange, await self._tool(call, spec, exchange.turn, index, once))
            index += 1
        self._running = []
        return None

    # -- tools --------------------------------------------------------------------
    def _result(
        self, call: ToolCall, turn: int, text: str, *, error: bool = False, ref: str | None = None
    ) -> ToolResult:
        return ToolResult(
            call_id=call.id,
            tool=call.name,
            turn=turn,
            text=clip(text, RESULT_CAP),
            is_error=error,
            ref=ref,
        )

    def _refusal(self, call: ToolCall, spec: Tool[Any, Any] | None) -> str | None:
        """Why a call cannot run at all, or None."""
        if spec is None:
            available = ", ".join(t.name for t in tools_for(self.role))
            return f"unknown tool {call.name!r} for the {self.role.value}; available: {available}"
        if call.invalid_arguments is not None:
            return f"{call.name}: not run, its arguments are unusable: {call.invalid_arguments}"
        return None

    async def _tool(
        self,
        call: ToolCall,
        spec: Tool[Any, Any] | None,
        turn: int,
        index: int,
        once: bool = False,
    ) -> ToolResult:
        refusal = self._refusal(call, spec)
        if refusal is not None or spec is None or spec.activity is None:
            return self._result(call, turn, refusal or f"{call.name}: not a tool", error=True)
        given = spec.shortcut(call.arguments) if spec.shortcut is not None else None
        if given is not None:
            return self._result(call, turn, given)
        # Validated here, before scheduling: a malformed call goes straight back to the
        # model instead of failing the activity's input decoding and burning retries.
        try:
            request = spec.arguments(call.arguments)
        except ValidationError as err:
            return self._result(call, turn, f"{call.name}: invalid arguments: {err}", error=True)
        activity = spec.activity

        def attempt(activity_id: str) -> Coroutine[Any, Any, Any]:
            return self._execute(
                activity,
                request,
                spec.result or dict,
                start_to_close=spec.timeout(request),
                heartbeat=spec.heartbeat,
                summary=tool_summary(call.name, call.arguments),
                activity_id=activity_id,
                once=once,
            )

        try:
            first = tool_activity_id(turn, index)
            result = await (at_most_once(attempt, first) if once else attempt(first))
        except ActivityError as err:
            if is_cancelled_exception(err):
                raise
            text = failure_text(err)
            if once:
                text += " (an approved call is not tried again once it may have started)"
            return self._result(call, turn, text, error=True)
        rendered = spec.rendered(result)
        answer = self._result(call, turn, rendered.text, error=rendered.is_error, ref=rendered.ref)
        self._digests[call.id] = digest(answer.text)
        return answer
