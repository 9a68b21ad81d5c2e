"""Extraction of what a finished run did from its Temporal history and its steps'."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.converter import WorkflowSerializationContext

from .._failure_text import opened_message
from ._records import (
    MAX_CHILDREN,
    MAX_COMMAND,
    MAX_ITEMS_PER_RUN,
    MAX_TEXT,
    CommandRecord,
    FailureRecord,
    MemoryOpRecord,
    RunRecord,
)

Decode = Callable[[Any], Awaitable[list[Any]]]


def _first(value: Any, keys: Sequence[str]) -> Any:
    if isinstance(value, Mapping):
        for key in keys:
            if key in value and value[key] is not None:
                return value[key]
    return None


def text_of(value: Any, limit: int) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit]


class _RunExtract:
    def __init__(self) -> None:
        self.tool_calls = 0
        self.commands: list[CommandRecord] = []
        self.failures: list[FailureRecord] = []
        self.memory_ops: list[MemoryOpRecord] = []
        self.truncated = False
        self.task: str | None = None
        self.summary: str | None = None

    def room(self) -> bool:
        if len(self.commands) + len(self.failures) + len(self.memory_ops) >= MAX_ITEMS_PER_RUN:
            self.truncated = True
            return False
        return True


def _store_of(path: str | None) -> str | None:
    """The kind of store a virtual memory path names (``/mnt/memory/<kind>/...``)."""
    if path is None:
        return None
    parts = PurePosixPath(path).parts
    if len(parts) >= 4 and parts[:3] == ("/", "mnt", "memory"):
        return parts[3]
    return None


async def _decode_first(decode: Decode, payloads: Any) -> Any:
    if payloads is None or not payloads.payloads:
        return None
    try:
        values = await decode(payloads.payloads)
    except Exception:
        return None
    return values[0] if values else None


def _task_of(value: Any) -> str | None:
    """An agent's task: a plain string input, or the ``task`` of an ``AgentInput``."""
    return text_of(value if isinstance(value, str) else _first(value, ("task",)), MAX_TEXT)


async def _extract_history(
    events: Sequence[Any], decode: Decode, out: _RunExtract, *, top: bool = True
) -> list[tuple[str, str]]:
    """Fold one history into ``out``; return the child workflows it started (ID, run id).
    ``top`` marks the run's own history, whose input and result are its task and summary."""
    scheduled: dict[int, tuple[str, Any]] = {}
    children: list[tuple[str, str]] = []
    for event in events:
        kind = event.WhichOneof("attributes")
        if top and kind == "workflow_execution_started_event_attributes":
            arg = await _decode_first(
                decode, event.workflow_execution_started_event_attributes.input
            )
            out.task = _task_of(arg)
        elif top and kind == "workflow_execution_completed_event_attributes":
            result = await _decode_first(
                decode, event.workflow_execution_completed_event_attributes.result
            )
            summary = result if isinstance(result, str) else _first(result, ("summary",))
            out.summary = text_of(summary, MAX_TEXT)
        elif kind == "activity_task_scheduled_event_attributes":
            attrs = event.activity_task_scheduled_event_attributes
            name = attrs.activity_type.name
            if name.startswith("lw.bash") or name.startswith("lw.memory."):
                arg = await _decode_first(decode, attrs.input)
            else:
                arg = None
            scheduled[event.event_id] = (name, arg)
            out.tool_calls += 1
        elif kind == "activity_task_completed_event_attributes":
            attrs = event.activity_task_completed_event_attributes
            name, arg = scheduled.pop(attrs.scheduled_event_id, ("", None))
            if not out.room():
                continue
            if name == "lw.bash":
                result = await _decode_first(decode, attrs.result)
                command = text_of(_first(arg, ("command",)), MAX_COMMAND) or ""
                exit_code = _first(result, ("exit_code",))
                rejection = _first(result, ("rejection",))
                out.commands.append(
                    CommandRecord(
                        command=command,
                        exit_code=exit_code if isinstance(exit_code, int) else None,
                        rejection=text_of(rejection, 300),
                    )
                )
            elif name.startswith("lw.memory."):
                op = name.removeprefix("lw.memory.")
                path = text_of(_first(arg, ("path",)), 300)
                store = _store_of(path)
                out.memory_ops.append(
                    MemoryOpRecord(
                        op=op,
                        path=path,
                        content=text_of(
                            _first(arg, ("content", "new", "text", "new_str", "file_text")),
                            MAX_TEXT,
                        ),
                        store=store,
                    )
                )
        elif kind in (
            "activity_task_failed_event_attributes",
            "activity_task_timed_out_event_attributes",
        ):
            attrs = getattr(event, kind)
            name, _ = scheduled.pop(attrs.scheduled_event_id, ("", None))
            if out.room():
                message = await opened_message(attrs.failure, decode) or "failed"
                if kind.startswith("activity_task_timed_out"):
                    message = f"timed out: {message}"
                out.failures.append(
                    FailureRecord(source=f"activity:{name}", message=text_of(message, 500) or "")
                )
        elif kind == "workflow_execution_failed_event_attributes":
            attrs = event.workflow_execution_failed_event_attributes
            if out.room():
                out.failures.append(
                    FailureRecord(
                        source="workflow",
                        message=text_of(await opened_message(attrs.failure, decode), 500) or "",
                    )
                )
        elif kind == "child_workflow_execution_started_event_attributes":
            if len(children) < MAX_CHILDREN:
                started = event.child_workflow_execution_started_event_attributes
                # The run the parent started (a later run under the child's ID, anyone's
                # workflow once the child closed, is not this run's step).
                execution = started.workflow_execution
                children.append((execution.workflow_id, execution.run_id))
            else:
                out.truncated = True
    return children


async def extract_run(
    client: Client, workflow_id: str, run_id: str, status: str, close_time: datetime | None
) -> RunRecord:
    """The record of one run: its own history plus its steps' (its child workflows').
    A run whose tree was forgotten (its payload key shredded) is recorded as such, with
    nothing of what it did."""
    from .._privacy._codec import ForeignPayload, PayloadSealed

    out = _RunExtract()
    forgotten = False

    def decoder(of: str) -> Decode:
        # Bound to the history's own workflow: its codec opens only that tree's
        # payloads, so another tree's input copied into a forged run stays unread.
        context = WorkflowSerializationContext(namespace=client.namespace, workflow_id=of)
        converter = client.data_converter.with_context(context)

        async def decode(payloads: Any) -> list[Any]:
            nonlocal forgotten
            try:
                return await converter.decode(payloads)
            except ForeignPayload:
                raise
            except PayloadSealed:
                forgotten = True
                raise

        return decode

    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    history = await handle.fetch_history()
    children = await _extract_history(history.events, decoder(workflow_id), out)
    for child, child_run in children:
        activity.heartbeat()
        try:
            child_history = await client.get_workflow_handle(
                child, run_id=child_run or None
            ).fetch_history()
        except Exception:
            out.truncated = True
            continue
        await _extract_history(child_history.events, decoder(child), out, top=False)
    if forgotten:
        return RunRecord(
            workflow_id=workflow_id,
            run_id=run_id,
            status=status,
            close_time=close_time,
            summary="(this run was forgotten: its history can no longer be read)",
        )
    return RunRecord(
        workflow_id=workflow_id,
        run_id=run_id,
        status=status,
        close_time=close_time,
        task=out.task,
        summary=out.summary,
        tool_calls=out.tool_calls,
        commands=tuple(out.commands),
        failures=tuple(out.failures),
        memory_ops=tuple(out.memory_ops),
        truncated=out.truncated,
    )
