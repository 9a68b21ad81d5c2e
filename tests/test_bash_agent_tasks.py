"""Ordinary agent work through the real ``lw.bash`` on a real server: on bwrap every
task works as on a developer's machine; on Landlock every task works or is refused
with a reason that says why and what to do (never an unexplained failure).

The lean selection of ``tests/_task_corpus.py`` (``ci``); ``benchmarks/agent_tasks.py``
runs all of it and prints the counts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from tests._bash_support import SANDBOXES, bash_worker
from tests._task_corpus import TASKS, Task, available, run_task, seed_stores

SELECTED = [t for t in TASKS if t.ci]
#: The selected tasks Landlock cannot run, and the start of the reason it gives.
LANDLOCK_REFUSES = {
    "python-multiprocessing-pool": "POSIX semaphores and shared memory",
    "memory-tee-append": "path is read-only: /mnt/memory/workflow/notes.md; without a mount",
    "memory-rm-folder": "path is read-only: /mnt/memory/workflow/old; without a mount",
}


def test_the_selection_covers_the_kinds_of_work() -> None:
    names = {t.name for t in SELECTED}
    for kind in ("git-", "python-", "make-", "tar-", "heredoc-", "memory-", "identity-"):
        assert any(name.startswith(kind) for name in names), kind


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_agent_tasks(dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")], sandbox=sandbox)
    outcomes: dict[str, tuple[str, str]] = {}
    seed_stores(plugin.config.layout)
    async with bash_worker(dev_env, plugin) as bash:

        async def one(number: int, item: Task) -> None:
            planner = f"run_cr@{sandbox}-{number}"
            agent = planner if item.role == "planner" else f"{planner}/steps/step_1"
            outcomes[item.name] = await run_task(bash.run, agent, item)

        ready = [(n, t) for n, t in enumerate(SELECTED) if available(t)]
        # Tasks that leave memory alone run side by side (each agent has its own
        # scratch); the others one at a time, each on freshly seeded stores.
        await asyncio.gather(*(one(n, t) for n, t in ready if "/mnt/memory" not in str(t)))
        for number, item in ready:
            if "/mnt/memory" in str(item):
                seed_stores(plugin.config.layout)
                await one(number, item)
    assert len(outcomes) >= len(SELECTED) - 2, "most of the selection needs nothing missing"
    for name, (outcome, why) in outcomes.items():
        if sandbox == "bwrap" or name not in LANDLOCK_REFUSES:
            assert outcome == "worked", (name, why)
        else:
            assert outcome == "refused", (name, why)
            assert why.startswith(LANDLOCK_REFUSES[name]), (name, why)
