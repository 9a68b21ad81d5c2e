"""``lw-temporal run`` refuses, before it starts anything, a run that nobody would pick
up (no worker polls its task queue: none started, or the queue misspelled) and a run
ID that already named a run, finished or not: each is one line, the workflow count on
the server unchanged."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from ._live_support import lw, worker_process


async def _runs(env: WorkflowEnvironment, workflow_id: str) -> int:
    found = env.client.list_workflows(f"WorkflowId = '{workflow_id}'")
    return len([w async for w in found])


async def test_a_queue_no_worker_polls_is_refused_before_starting(
    dev_env: WorkflowEnvironment, task_queue: str
) -> None:
    code, out, err = await lw(dev_env, "run", "steady", "Go.", "--task-queue", task_queue,
                              "--id", "nobody-1")  # fmt: skip
    assert code == 1, (out, err)
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"lw-temporal run: no worker polls task queue '{task_queue}' on ")
    assert "--without-worker" in err
    assert await _runs(dev_env, "run_steady@nobody-1") == 0


async def test_the_id_of_a_finished_run_is_refused(
    dev_env: WorkflowEnvironment, tmp_path: Path, task_queue: str
) -> None:
    queue = ("--task-queue", task_queue)
    async with worker_process(dev_env, tmp_path / "data", task_queue, "--create"):
        code, out, err = await lw(dev_env, "run", "steady", "Once.", *queue, "--id", "once-1")
        assert code == 0, (out, err)
        code, out, err = await lw(dev_env, "run", "steady", "Twice.", *queue, "--id", "once-1")
    assert code == 2, (out, err)
    assert out == ""  # never said it was starting
    assert err.startswith("lw-temporal run: a workflow run_steady@once-1 already exists: ")
    assert await _runs(dev_env, "run_steady@once-1") == 1
