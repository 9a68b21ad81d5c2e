"""A model's bash call naming an absurd timeout gets an answer, as every other input
does: the loop schedules ``lw.bash`` with the request's timeout, and
``timeout_seconds=1e300`` passed the request's validation and then overflowed that
timedelta in the planner's workflow task, which failed again on every retry: the run
never went on. Now the call is refused as invalid arguments, and the run finishes; a
long but sane timeout still runs (infinity is refused before, as JSON cannot carry it)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, ModelRequest, Role, ToolCall, WorkflowDefinition
from lw_temporal.ids import AgentId
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import lw_worker

CR = WorkflowDefinition(id="cr")


def _report(request: ModelRequest) -> list[ToolCall]:
    entries = request.last_results()
    return [tool("finish", summary="\n=====\n".join(f"{e.ok} {e.text}" for e in entries))]


MODEL = ScriptedModel(
    {
        ("cr", Role.PLANNER): [
            [
                tool("bash", command="echo huge", timeout_seconds=1e300),
                tool("bash", command="echo bigger", timeout_seconds=1e20),
                tool("bash", command="echo long", timeout_seconds=30 * 24 * 3600),
            ],
            _report,
        ]
    }
)


async def test_an_absurd_timeout_is_an_invalid_argument(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    run = AgentId.planner("cr", task_queue)
    async with lw_worker(dev_env, data_dir, task_queue, [CR], MODEL) as client:
        result = await client.execute_workflow(
            "lw.Planner",
            AgentInput(),
            id=str(run),
            task_queue=task_queue,
            result_type=AgentResult,
            execution_timeout=timedelta(seconds=90),
        )
    huge, bigger, long = result.summary.split("\n=====\n")
    for outcome in (huge, bigger):
        assert outcome.startswith("False bash: invalid arguments"), outcome
        assert "timeout_seconds" in outcome, outcome
    assert long.startswith("True exit code 0") and "long" in long, long
