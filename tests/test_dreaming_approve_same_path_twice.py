"""``dream approve --only`` naming one file twice (the same path in two of the forms
``show`` prints, ``consolidated.md`` and ``b/<target>/consolidated.md``) promotes it
once, and the reviewer is told so once; the dream closes approved. (Before, the
outcome listed the file as promoted twice.)"""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentResult
from lw_temporal.dreaming import (
    DreamInput,
    DreamResult,
    DreamStatus,
    approve_dream,
    wait_for_review,
)
from lw_temporal.testing import running_worker

from ._ui_support import DEFINITIONS, model


async def test_one_path_given_twice_is_promoted_once(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    async with running_worker(
        dev_env.client,
        data_dir=data_dir,
        definitions=DEFINITIONS,
        model=model(),
        task_queue=task_queue,
    ) as client:
        await client.execute_workflow(
            "lw.Planner",
            "Note it.",
            id=f"run_ui-notes@{task_queue}",
            task_queue=task_queue,
            result_type=AgentResult,
        )
        dream_id = f"dream_ui-notes@{task_queue}"
        handle = await client.start_workflow(
            "lw.Dreaming",
            DreamInput(target="ui-notes"),
            id=dream_id,
            task_queue=task_queue,
            result_type=DreamResult,
        )
        assert (await wait_for_review(client, dream_id)).status is DreamStatus.AWAITING_APPROVAL
        outcome = await approve_dream(
            client,
            dream_id,
            "carol",
            "once",
            only=["consolidated.md", "b/ui-notes/consolidated.md"],
        )
        assert outcome.conflicts == (), outcome
        assert outcome.promoted == ("consolidated.md",), outcome
        assert outcome.dropped == ("failures.md",), outcome
        result = await handle.result()
    assert result.status is DreamStatus.APPROVED, result
