"""A dream started with an input it cannot use (no ``target``, a number, a list, a
``max_runs`` of 0) fails at once, non-retryably, naming the problem and the fix. The
SDK decodes a workflow's input before its code runs, so such an input failed every
workflow task after it and the dream stayed Running for ever. The worker still runs a
good dream afterwards."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from lw_temporal.dreaming import DreamResult, DreamStatus
from lw_temporal.errors import INVALID_REQUEST

from ._dreaming_support import dreaming_worker, start_dream, unique_definition

BAD: list[tuple[Any, str]] = [
    ({}, "target: Field required"),
    ({"options": {"max_runs": 3}}, "target: Field required"),
    (12345, "valid dictionary"),
    ([1, 2], "valid dictionary"),
    ({"target": None}, "target: Input should be a valid string"),
    ({"target": "x", "options": {"max_runs": 0}}, "options.max_runs: Input should be greater"),
]


async def test_a_dream_start_it_cannot_use_fails_the_dream_saying_why(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    target = unique_definition("bad")
    async with dreaming_worker(dev_env, data_dir, task_queue, [target]) as client:
        for raw, said in BAD:
            workflow_id = f"dream_{target}@{uuid.uuid4().hex[:8]}"
            handle = await client.start_workflow(
                "lw.Dreaming", raw, id=workflow_id, task_queue=task_queue
            )
            try:  # not Running for ever
                await asyncio.wait_for(handle.result(), timeout=60)
            except WorkflowFailureError as failed:
                cause = failed.cause
            else:
                raise AssertionError(f"{raw!r} was accepted")
            assert isinstance(cause, ApplicationError), repr(cause)
            assert cause.type == INVALID_REQUEST and cause.non_retryable, cause
            assert said in cause.message and workflow_id in cause.message, cause.message
            assert "DreamInput(target=" in cause.message, cause.message
            history = await handle.fetch_history()
            failed_tasks = [e for e in history.events if e.HasField(
                "workflow_task_failed_event_attributes")]  # fmt: skip
            assert failed_tasks == []  # failed once, as a run, not task after task
        good = await start_dream(client, task_queue, target, since=datetime(2026, 1, 1, tzinfo=UTC))
        result = await good.result()
    assert isinstance(result, DreamResult) and result.status is DreamStatus.NOTHING_NEW
