"""A worker's scratch 1,500 folders deep (deeper than Python's recursion limit) hurts
nothing: the command gets its result, the worker serves the next one, and scratch
retention still measures and removes that run's scratch."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._sandbox import remove_tree
from lw_temporal.ids import parse_workflow_id
from lw_temporal.memory import RetentionPolicy, collect_garbage
from tests._bash_support import SANDBOXES, bash_worker
from tests.conftest import pydantic_client

DEEP = "$(printf 'd/%.0s' $(seq 1500))"


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_a_deep_scratch_tree_is_served_and_collected(
    dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")], sandbox=sandbox)
    worker = f"pipeline_deep{uuid.uuid4().hex[:6]}/sub-runs/run_cr@1/steps/step_1"
    async with bash_worker(dev_env, plugin) as bash:
        made, served = await bash.run(
            worker, [f"mkdir -p {DEEP} && echo x > {DEEP}f && echo made", "echo served"]
        )
    assert made.stdout == "made\n", made.stderr
    assert served.stdout == "served\n"
    scratch = plugin.config.layout.scratch(parse_workflow_id(worker))
    assert scratch.is_dir()

    try:
        report = await collect_garbage(
            pydantic_client(dev_env),
            plugin.config.layout,
            RetentionPolicy(retain=timedelta(0)),
            actor="test",
        )
        left = scratch.exists()
    finally:  # a deep tree left behind would break the test runner's own cleanup
        remove_tree(scratch)
    assert report.skipped == ()
    assert [item.workflow_id for item in report.removed] == [worker]
    assert report.removed[0].files >= 1
    assert not left
