"""Why a closed workflow failed, read from its close event: the one line the live tree,
``lw-temporal run`` and dreaming's review calls print for a failed run."""

from __future__ import annotations

from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.failure.v1 import Failure
from temporalio.client import Client, WorkflowHandle, WorkflowHistoryEventFilterType

from ._privacy._sealed_failures import opened_message


async def failure_message(client: Client, workflow_id: str) -> str:
    """Why a closed workflow failed, from its close event (every cause, outermost first)."""
    handle: WorkflowHandle[Any, Any] = client.get_workflow_handle(workflow_id)
    async for event in handle.fetch_history_events(
        event_filter_type=WorkflowHistoryEventFilterType.CLOSE_EVENT
    ):
        if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
            return EventType.Name(event.event_type).removeprefix("EVENT_TYPE_WORKFLOW_EXECUTION_")
        failure: Failure | None = event.workflow_execution_failed_event_attributes.failure
        messages = []
        while failure is not None and failure.message:
            messages.append(await opened_message(failure, client.data_converter.decode))
            failure = failure.cause if failure.HasField("cause") else None
        return " <- ".join(messages) or "failed"
    return "failed"
