"""A dream's target comes from its workflow ID: an input naming another target, or a
target this worker does not serve, fails with a typed error; a dream with nothing new
completes at once without waiting for a reviewer and keeps its cursor."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from lw_temporal.dreaming import DreamInput, DreamOptions, DreamResult, DreamStatus
from lw_temporal.dreaming._bookkeeping import DreamBooks
from lw_temporal.errors import INVALID_REQUEST, UNKNOWN_DEFINITION
from lw_temporal.ids import DataLayout

from ._dreaming_support import dreaming_worker, start_dream, unique_definition


def _kind(err: WorkflowFailureError) -> str | None:
    cause: BaseException | None = err.cause
    while cause is not None and not isinstance(cause, ApplicationError):
        cause = cause.__cause__
    return cause.type if isinstance(cause, ApplicationError) else None


async def test_input_naming_another_target_than_the_id_fails(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    target, other = unique_definition("a"), unique_definition("b")
    async with dreaming_worker(dev_env, data_dir, task_queue, [target, other]) as client:
        with pytest.raises(WorkflowFailureError) as failure:
            await client.execute_workflow(
                "lw.Dreaming",
                DreamInput(target=other),
                id=f"dream_{target}@{uuid.uuid4().hex[:8]}",
                task_queue=task_queue,
            )
    assert _kind(failure.value) == INVALID_REQUEST
    assert f"dream_{other}@<token>" in str(failure.value.cause)


async def test_a_target_the_worker_does_not_serve_fails(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    served, unknown = unique_definition("a"), unique_definition("nobody")
    async with dreaming_worker(dev_env, data_dir, task_queue, [served]) as client:
        handle = await start_dream(client, task_queue, unknown)
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
    assert _kind(failure.value) == UNKNOWN_DEFINITION


async def test_nothing_new_completes_without_waiting_and_keeps_the_cursor(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    target = unique_definition("quiet")
    since = datetime(2026, 1, 1, tzinfo=UTC)
    async with dreaming_worker(dev_env, data_dir, task_queue, [target]) as client:
        handle = await start_dream(client, task_queue, target, since=since)
        result = await handle.result()
    assert isinstance(result, DreamResult)
    assert result.status is DreamStatus.NOTHING_NEW
    assert result.runs == 0 and result.changes == ()
    cursor = DreamBooks(DataLayout.at(data_dir), target).cursor()
    assert cursor.close_time == since
    assert not (data_dir / "memory" / "workflows" / "memory.dreaming" / target).exists()
    assert DreamOptions().approval_timeout.days == 7
