"""A dream's approval that reaches it after its approval timeout promotes nothing: the
dream timed out when its deadline passed, even if no worker was up to see the timer
fire. An approval sent while the worker was down, delivered together with the timer,
is refused, the dream closes as timed out, gives its runs back, and the target's memory
is as it was. (Before, the late approval was taken and promoted the proposal.)"""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from temporalio.client import Client, WorkflowUpdateFailedError, WorkflowUpdateStage
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentResult
from lw_temporal._config import LwConfig
from lw_temporal.dreaming import (
    Decision,
    DreamInput,
    DreamOptions,
    DreamResult,
    DreamStatus,
    wait_for_review,
)
from lw_temporal.dreaming._records import UPDATE_APPROVE
from lw_temporal.memory import MemoryStores, StoreKind, StoreRef
from lw_temporal.testing import running_worker

from ._ui_support import DEFINITIONS, model

TIMEOUT = timedelta(seconds=8)


async def test_an_approval_delivered_after_the_dreams_timeout_promotes_nothing(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    def worker() -> AbstractAsyncContextManager[Client]:
        return running_worker(
            dev_env.client,
            data_dir=data_dir,
            definitions=DEFINITIONS,
            model=model(),
            task_queue=task_queue,
        )

    dream_id = f"dream_ui-notes@{task_queue}"
    async with worker() as client:
        await client.execute_workflow(
            "lw.Planner",
            "Note it.",
            id=f"run_ui-notes@{task_queue}",
            task_queue=task_queue,
            result_type=AgentResult,
        )
        options = DreamOptions(approval_timeout=TIMEOUT)
        handle = await client.start_workflow(
            "lw.Dreaming",
            DreamInput(target="ui-notes", options=options),
            id=dream_id,
            task_queue=task_queue,
            result_type=DreamResult,
        )
        waiting = await wait_for_review(client, dream_id)
        assert waiting.status is DreamStatus.AWAITING_APPROVAL
        assert waiting.approval_deadline is not None
    # The worker is gone before the deadline (else the dream simply timed out).
    assert datetime.now(UTC) < waiting.approval_deadline - timedelta(seconds=1)
    await asyncio.sleep((waiting.approval_deadline - datetime.now(UTC)).total_seconds() + 2)
    late = asyncio.create_task(
        handle.start_update(
            UPDATE_APPROVE,
            Decision(who="carol", why="late"),
            wait_for_stage=WorkflowUpdateStage.ACCEPTED,
        )
    )
    await asyncio.sleep(1)
    async with worker():
        try:
            accepted = await asyncio.wait_for(late, timeout=60)
            promoted = await accepted.result()
            raise AssertionError(f"a late approval was taken: {promoted}")
        except WorkflowUpdateFailedError as err:
            assert isinstance(err.cause, ApplicationError), err
            assert "timed out" in err.cause.message, err.cause.message
        result = await handle.result()
    assert result.status is DreamStatus.TIMED_OUT, result
    assert result.decision is None and result.promotion is None, result
    stores = MemoryStores.for_config(LwConfig.create(data_dir, []))
    target = StoreRef(StoreKind.WORKFLOW, "ui-notes")
    assert not stores.read(target, "consolidated.md").exists
    assert not stores.read(target, "failures.md").exists
