"""A command that prints 10 MB adds at most its output cap plus 4 KiB to its workflow's
history, compared with one that prints nothing: the rest stays in a scratch file that
the result references, and the next model turn gets the result from the worker that
recorded it, not a second copy through the history."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, ModelRequest, Role, ToolCall, WorkflowDefinition
from lw_temporal.ids import AgentId, DataLayout
from lw_temporal.options import BashOptions, ModelCallOptions
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import lw_worker

CAP = 16 * 1024
SLACK = 4 * 1024
TEN_MB = 10 * 1024 * 1024
LOUD = f"head -c {TEN_MB} /dev/zero | tr '\\0' x"
QUIET = "true"

STEPS = WorkflowDefinition(id="steps", max_turns=10)


def _commands(request: ModelRequest) -> list[ToolCall]:
    kind, count = request.task.split(":")
    if request.turn < int(count):
        return [tool("bash", command=LOUD if kind == "loud" else QUIET)]
    refs = [r.ref or "" for r in request.tool_results()]
    return [tool("finish", summary=",".join(refs))]


MODEL = ScriptedModel(
    {
        ("steps", Role.PLANNER): [
            [tool("run_step", task=t) for t in ("quiet:1", "loud:1", "quiet:3", "loud:3")],
            [tool("finish", summary="done")],
        ],
        ("steps", Role.WORKER): [_commands] * 5,
    }
)


async def _history_bytes(client: Client, workflow_id: str) -> int:
    description = await client.get_workflow_handle(workflow_id).describe()
    return description.raw_description.workflow_execution_info.history_size_bytes


@pytest.mark.parametrize("local_model", [False, True], ids=["model-activity", "local-model"])
async def test_a_10mb_output_adds_at_most_cap_plus_4k_per_bash_step(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str, local_model: bool
) -> None:
    run = AgentId.planner("steps", task_queue)
    async with lw_worker(
        dev_env,
        data_dir,
        task_queue,
        [STEPS],
        MODEL,
        bash=BashOptions(output_cap=CAP),
        model_calls=ModelCallOptions(local_activity=local_model),
    ) as client:
        await client.execute_workflow(
            "lw.Planner", AgentInput(), id=str(run), task_queue=task_queue
        )
        sizes = [await _history_bytes(client, str(run.step_run(str(i)))) for i in (1, 2, 3, 4)]
        loud = await client.get_workflow_handle(
            str(run.step_run("2")), result_type=AgentResult
        ).result()
    quiet_one, loud_one, quiet_three, loud_three = sizes
    print(f"history bytes (quiet:1, loud:1, quiet:3, loud:3): {sizes}")
    assert loud_one - quiet_one <= CAP + SLACK, sizes
    assert loud_three - quiet_three <= 3 * (CAP + SLACK), sizes
    # The cap was hit (the output is in the history up to it) ...
    assert loud_one - quiet_one >= CAP, sizes
    # ... and the whole output is in the step's own scratch, referenced by its result.
    ref = loud.summary
    assert ref.startswith("/mnt/scratch/own/"), ref
    saved = DataLayout.at(data_dir).scratch(run.step_run("2")) / ref.removeprefix(
        "/mnt/scratch/own/"
    )
    assert saved.stat().st_size > CAP
