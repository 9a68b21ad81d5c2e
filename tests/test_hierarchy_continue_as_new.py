"""A planner that continues as new between turns keeps its transcript, its child
numbering and its children: the result equals that of a run that never continued."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, Role, WorkflowDefinition
from lw_temporal.errors import TURN_LIMIT
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import failure_type, lw_worker

ALPHA = WorkflowDefinition(id="alpha", max_turns=3)
MODEL = ScriptedModel(
    {
        ("alpha", Role.PLANNER): [
            [tool("run_step", task="1"), tool("run_step", task="2")],
            [tool("run_step", task="3")],
            lambda r: [
                tool(
                    "finish",
                    summary=" | ".join(e.text for e in r.tool_results()),
                )
            ],
        ],
        ("alpha", Role.WORKER): [lambda r: [tool("finish", summary=f"step {r.task} ok")]],
    }
)


async def test_continue_as_new_keeps_state(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    async with lw_worker(dev_env, data_dir, task_queue, [ALPHA], MODEL) as client:
        results: list[AgentResult] = []
        for name, per_run in (("plain", None), ("continued", 1)):
            run = f"run_alpha@{name}-{task_queue}"
            handle = await client.start_workflow(
                "lw.Planner",
                AgentInput(turns_per_run=per_run),
                id=run,
                task_queue=task_queue,
                result_type=AgentResult,
            )
            result = await handle.result()
            results.append(result)
            assert result.children == [f"{run}/steps/step_{i}" for i in (1, 2, 3)]
            assert result.turns == 3
            current = await client.get_workflow_handle(run).describe()
            continued = current.run_id != handle.first_execution_run_id
            assert continued is (per_run is not None)
        plain, continued_result = results
        assert "step 3 ok" in plain.summary
        assert continued_result.summary == plain.summary.replace("plain", "continued")


async def test_an_agent_that_never_finishes_hits_its_turn_limit(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    endless = ScriptedModel({("alpha", Role.PLANNER): [[tool("think")] for _ in range(10)]})
    async with lw_worker(dev_env, data_dir, task_queue, [ALPHA], endless) as client:
        handle = await client.start_workflow(
            "lw.Planner", AgentInput(), id=f"run_alpha@{task_queue}", task_queue=task_queue
        )
        assert await failure_type(handle) == TURN_LIMIT
