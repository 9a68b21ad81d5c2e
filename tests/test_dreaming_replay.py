"""The histories of approved, rejected and timed-out dreams replay deterministically
against the current ``lw.Dreaming`` code."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from lw_temporal import LittleWorkflowPlugin
from lw_temporal.dreaming import DreamStatus, approve_dream, reject_dream

from ._dreaming_support import (
    Script,
    dreaming_worker,
    run_planners,
    start_dream,
    unique_definition,
    wait_for_status,
)


async def test_dream_histories_replay(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    target = unique_definition("replay")
    async with dreaming_worker(dev_env, data_dir, task_queue, [target]) as client:
        handles = []
        for n in range(3):  # each dream claims the one run that closed before it
            script = Script(commands=[f"exit {n}"], lessons=[f"lesson {n}"])
            await run_planners(client, task_queue, target, [script])
            options = {"approval_timeout": 1} if n == 2 else {}
            handles.append(await start_dream(client, task_queue, target, **options))
            if n < 2:
                await wait_for_status(handles[-1], DreamStatus.AWAITING_APPROVAL)
        await reject_dream(client, handles[0].id, "erin", "not now")
        await approve_dream(client, handles[1].id, "frank", "fine")
        timed_out = handles.pop()
        results = [await h.result() for h in [*handles, timed_out]]
        histories = [await h.fetch_history() for h in [*handles, timed_out]]

    assert [r.status for r in results] == [
        DreamStatus.REJECTED,
        DreamStatus.APPROVED,
        DreamStatus.TIMED_OUT,
    ]
    # Configured by the plugin, as a production worker is (converter, sandbox runner).
    replayer = Replayer(workflows=[], plugins=[LittleWorkflowPlugin(data_dir, [])])
    for history in histories:
        await replayer.replay_workflow(history)
