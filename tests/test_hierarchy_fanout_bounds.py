"""A run fans out only as far as its definition says: children per turn
(``max_children_per_turn``), children per run (``max_children``) and turns of its whole
tree (``max_tree_turns``, shared out among children started together, what they did not
use given back). A call past a bound starts nothing and gets an error result naming it,
which the model reads in its next turn; the orchestrator's bounds come from
``OrchestratorOptions``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentResult, ModelRequest, Role, ToolCall, WorkflowDefinition
from lw_temporal.models import ToolResult
from lw_temporal.options import OrchestratorOptions
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import lw_worker


class Reader:
    """A script turn that keeps the results the model was sent, then finishes."""

    def __init__(self) -> None:
        self.results: list[list[ToolResult]] = []

    def then(self, *calls: ToolCall) -> Callable[[ModelRequest], list[ToolCall]]:
        def turn(request: ModelRequest) -> list[ToolCall]:
            self.results.append(request.last_results())
            return list(calls)

        return turn


def _steps(n: int) -> list[ToolCall]:
    return [tool("run_step", task=f"step {i}") for i in range(n)]


def _refused(results: list[ToolResult]) -> list[str]:
    return [r.text for r in results if r.is_error]


async def test_sixty_steps_in_one_turn_start_ten(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    wide = WorkflowDefinition(id="wide")
    reader = Reader()
    model = ScriptedModel(
        {
            ("wide", Role.PLANNER): [_steps(60), reader.then(tool("finish", summary="done"))],
            ("wide", Role.WORKER): [[tool("finish", summary="ok")]],
        }
    )
    async with lw_worker(dev_env, data_dir, task_queue, [wide], model) as client:
        result: AgentResult = await client.execute_workflow(
            "lw.Planner",
            "go",
            id=f"run_wide@{task_queue}",
            task_queue=task_queue,
            result_type=AgentResult,
        )
    assert result.children == [f"run_wide@{task_queue}/steps/step_{n}" for n in range(1, 11)]
    (results,) = reader.results
    assert len(results) == 60
    refused = _refused(results)
    assert len(refused) == 50
    assert all("at most 10 children per turn" in t for t in refused), refused[0]
    assert all("max_children_per_turn" in t for t in refused)


async def test_children_per_run_and_turns_per_tree_are_bounded(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    few = WorkflowDefinition(id="few", max_children_per_turn=3, max_children=4)
    tight = WorkflowDefinition(id="tight", max_tree_turns=9)
    stuck = WorkflowDefinition(id="stuck", max_tree_turns=4)
    few_reader, tight_reader, stuck_reader = Reader(), Reader(), Reader()
    finish = tool("finish", summary="done")
    model = ScriptedModel(
        {
            ("few", Role.PLANNER): [
                _steps(3),
                few_reader.then(*_steps(3)),
                few_reader.then(finish),
            ],
            ("few", Role.WORKER): [[tool("finish", summary="ok")]],
            ("tight", Role.PLANNER): [
                _steps(3),
                tight_reader.then(*_steps(5)),
                tight_reader.then(finish),
            ],
            ("tight", Role.WORKER): [[tool("finish", summary="ok")]],
            ("stuck", Role.PLANNER): [_steps(1), stuck_reader.then(finish)],
            ("stuck", Role.WORKER): [[tool("bash", command="true")]] * 30,
        }
    )
    async with lw_worker(dev_env, data_dir, task_queue, [few, tight, stuck], model) as client:
        results = [
            await client.execute_workflow(
                "lw.Planner",
                "go",
                id=f"run_{d}@{task_queue}",
                task_queue=task_queue,
                result_type=AgentResult,
            )
            for d in ("few", "tight", "stuck")
        ]
    few_result, tight_result, stuck_result = results

    # Per run: 3 in the first turn, then 1 of 3 before the run's 4 are used up.
    assert len(few_result.children) == 4
    second = _refused(few_reader.results[1])
    assert len(second) == 2 and all("max_children=4" in t for t in second), second

    # Per tree: 9 turns. The first 3 steps share 7 (one kept for the planner), use 1
    # each; of the next 5, 3 fit in what is left; the planner finishes on its last turn.
    assert len(tight_result.children) == 6
    refused = _refused(tight_reader.results[1])
    assert len(refused) == 2 and all("max_tree_turns" in t for t in refused), refused
    assert tight_result.tree_turns == 9

    # A step that never finishes stops at its share of the tree (2 of 4), and the
    # planner still has its turn to read that and finish.
    (failed,) = _refused(stuck_reader.results[0])
    assert "LwTurnLimit" in failed and "all 2 turns of its budget" in failed, failed
    assert stuck_result.summary == "done" and stuck_result.tree_turns == 4


async def test_the_orchestrators_bounds_come_from_its_options(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    alpha = WorkflowDefinition(id="alpha")
    reader = Reader()
    model = ScriptedModel(
        {
            (None, Role.ORCHESTRATOR): [
                [tool("plan_workflow", workflow="alpha", task=f"part {n}") for n in range(3)],
                reader.then(tool("finish", summary="done")),
            ],
            ("alpha", Role.PLANNER): [[tool("finish", summary="planned")]],
        }
    )
    async with lw_worker(
        dev_env,
        data_dir,
        task_queue,
        [alpha],
        model,
        orchestrator=OrchestratorOptions(max_children_per_turn=2),
    ) as client:
        result: AgentResult = await client.execute_workflow(
            "lw.Orchestrator",
            "go",
            id=f"pipeline_{task_queue}",
            task_queue=task_queue,
            result_type=AgentResult,
        )
    assert len(result.children) == 2
    (refused,) = _refused(reader.results[0])
    assert "at most 2 children per turn" in refused and "OrchestratorOptions" in refused
