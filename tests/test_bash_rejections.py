"""The seeds' two refusals, in the seeds' words, for every role, on a real server."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import REJECTED_EXIT_CODE, LittleWorkflowPlugin, WorkflowDefinition
from tests._bash_support import bash_worker

ORCHESTRATOR = "pipeline_rej"
PLANNER = "pipeline_rej/sub-runs/run_cr@1"
WORKER = "pipeline_rej/sub-runs/run_cr@1/steps/step_1"

# (agent, a read-only path of that role's view)
READ_ONLY_CASES = [
    (ORCHESTRATOR, "/mnt/memory/org/policy.md"),
    (ORCHESTRATOR, "/mnt/memory/available-workflows/cr/lessons.md"),
    (PLANNER, "/mnt/memory/pipeline/shared.md"),
    (PLANNER, "/mnt/memory/org/policy.md"),
    (PLANNER, "/mnt/scratch/from-orchestrator/brief.md"),
    (WORKER, "/mnt/memory/workflow/lessons.md"),
    (WORKER, "/mnt/memory/org/policy.md"),
    (WORKER, "/mnt/scratch/from-planner/plan.md"),
]


@pytest.fixture
def plugin(data_dir: Path) -> LittleWorkflowPlugin:
    return LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")])


@pytest.mark.parametrize("agent", [ORCHESTRATOR, PLANNER, WORKER])
async def test_outside_the_roots_is_refused_for_every_role(
    dev_env: WorkflowEnvironment, plugin: LittleWorkflowPlugin, agent: str
) -> None:
    async with bash_worker(dev_env, plugin) as bash:
        results = await bash.run(
            # /etc/hostname: a host file the view does not show (its /etc/hosts is the
            # sandbox's own)
            agent,
            ["cat /etc/shadow", "cat ../../../../etc/hostname", "ls /root", "echo ok"],
        )
    shadow, traversal, root, ok = results
    assert shadow.rejection == "path is outside the allowed roots: /etc/shadow"
    assert shadow.exit_code == REJECTED_EXIT_CODE and shadow.stdout == ""
    assert traversal.rejection == "path is outside the allowed roots: /etc/hostname"
    assert root.rejection == "path is outside the allowed roots: /root"
    assert ok.rejection is None and ok.exit_code == 0 and ok.stdout == "ok\n"


@pytest.mark.parametrize(("agent", "path"), READ_ONLY_CASES)
async def test_writing_a_read_only_mount_is_refused_for_every_role(
    dev_env: WorkflowEnvironment, plugin: LittleWorkflowPlugin, agent: str, path: str
) -> None:
    async with bash_worker(dev_env, plugin) as bash:
        redirect, tee, cat_ok = await bash.run(
            agent, [f"echo note > {path}", f"echo note | tee -a {path}", f"cat {path} || true"]
        )
    assert redirect.rejection == f"path is read-only: {path}"
    assert redirect.exit_code == REJECTED_EXIT_CODE
    assert tee.rejection == f"path is read-only: {path}"
    assert cat_ok.rejection is None  # reading the same path is allowed
    assert not any(plugin.data_dir.rglob(Path(path).name))


async def test_writable_roots_are_not_refused(
    dev_env: WorkflowEnvironment, plugin: LittleWorkflowPlugin
) -> None:
    async with bash_worker(dev_env, plugin) as bash:
        planner_write, orchestrator_write = (
            await bash.one(PLANNER, "echo lesson > /mnt/memory/workflow/lessons.md"),
            await bash.one(ORCHESTRATOR, "echo shared >> /mnt/memory/pipeline/shared.md"),
        )
    assert planner_write.rejection is None and planner_write.exit_code == 0
    assert orchestrator_write.rejection is None and orchestrator_write.exit_code == 0
    assert (plugin.data_dir / "memory/workflows/cr/lessons.md").read_text() == "lesson\n"
