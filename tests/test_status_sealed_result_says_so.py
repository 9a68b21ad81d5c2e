"""``lw-temporal status`` with keys that cannot open a closed run's result (``--data-dir``
naming another lw data dir) says so on the run's line, with the reason naming the key
store to give; each agent below it says "as above". Before, every line read only
``finished``, with no summary and no word about keys."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from lw_temporal import AgentInput, AgentResult, LittleWorkflowPlugin, Role, WorkflowDefinition
from lw_temporal.ids import DataLayout
from lw_temporal.testing import ScriptedModel, tool

from ._cli_support import cli
from .conftest import plugin_client

ALPHA = WorkflowDefinition(id="alpha")
MODEL = ScriptedModel(
    {
        ("alpha", Role.PLANNER): [[tool("run_step", task="one")], [tool("finish", summary="ok")]],
        ("alpha", Role.WORKER): [[tool("finish", summary="stepped")]],
    }
)


async def test_status_with_other_keys_says_the_result_is_sealed(
    dev_env: WorkflowEnvironment, tmp_path: Path, task_queue: str
) -> None:
    plugin = LittleWorkflowPlugin(tmp_path / "workers", [ALPHA], model=MODEL)
    client = plugin_client(dev_env, plugin)
    workflow_id = f"run_alpha@{task_queue}"
    async with Worker(client, task_queue=task_queue):
        result = await client.execute_workflow(
            "lw.Planner", AgentInput(), id=workflow_id, task_queue=task_queue,
            result_type=AgentResult,
        )  # fmt: skip
    assert result.summary == "ok"
    other = tmp_path / "other"
    DataLayout.at(other).state.mkdir(parents=True)  # an lw data dir of its own
    code, out, err = await cli(dev_env, "status", workflow_id, "--data-dir", str(other))
    assert code == 0, (out, err)
    lines = out.splitlines()
    assert lines[1].startswith(
        f"{workflow_id}  finished  (result sealed: payload sealed with the key of run tree "
    ), out
    assert "give this client the workers' key store" in lines[1]
    assert lines[2] == "  step_1  finished  (result sealed: as above)", out
    # With the workers' data dir the same command reads the result.
    code, out, _ = await cli(
        dev_env, "status", workflow_id, "--data-dir", str(tmp_path / "workers")
    )
    assert code == 0 and "finished  2 turns  ok" in out and "sealed" not in out, out
