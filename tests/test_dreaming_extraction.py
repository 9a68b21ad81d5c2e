"""Dreaming extracts tool calls, exit codes, failures, memory writes and the steps'
work from real Temporal histories of the target's runs, and only of the target's."""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path

from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from lw_temporal.dreaming import DreamStatus

from ._dreaming_support import (
    Script,
    Step,
    dreaming_worker,
    read_records,
    run_planners,
    start_dream,
    unique_definition,
    wait_for_status,
)


async def test_extraction_reads_commands_failures_memory_and_steps_of_target_runs_only(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    target, other = unique_definition("review"), unique_definition("scoring")
    async with dreaming_worker(dev_env, data_dir, task_queue, [target, other]) as client:
        target_ids = await run_planners(
            client,
            task_queue,
            target,
            [
                Script(
                    commands=["pytest -q", "exit 3"],
                    lessons=["pin the parser version"],
                    steps=[Step(commands=["ruff check .", "refuse cat /etc/shadow"])],
                    fail="model quota exhausted",
                ),
                Script(commands=["pytest -q"]),
            ],
        )
        await run_planners(client, task_queue, other, [Script(commands=["ls"])])
        handle = await start_dream(client, task_queue, target, batch_size=1)
        state = await wait_for_status(handle, DreamStatus.AWAITING_APPROVAL)
        await handle.cancel()
        with suppress(WorkflowFailureError):
            await handle.result()  # closed before its worker goes

    assert state.runs == 2
    records = {r.workflow_id: r for r in read_records(data_dir, handle.id)}
    assert set(records) == set(target_ids), "only the target's runs are read"
    first = records[target_ids[0]]
    commands = {(c.command, c.exit_code, c.rejection) for c in first.commands}
    assert ("pytest -q", 0, None) in commands
    assert ("exit 3", 3, None) in commands
    assert ("ruff check .", 0, None) in commands, "the step's history is read too"
    assert ("refuse cat /etc/shadow", 126, "path is outside the allowed roots") in commands
    assert [(f.source, f.message) for f in first.failures] == [
        ("activity:lw.model", "model quota exhausted")
    ]
    assert [(m.op, m.path, m.store, m.content) for m in first.memory_ops] == [
        ("append", "/mnt/memory/workflow/lessons.md", "workflow", "- pin the parser version\n")
    ]
    # Two batches of one run each: the history holds batch numbers, not records.
    batches = sorted((data_dir / "runs" / handle.id / "scratch" / "dream" / "batches").iterdir())
    assert len(batches) == 2
