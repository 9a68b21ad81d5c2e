"""The model sees the run's whole conversation, every result as the tool produced it,
across continue-as-new and after the worker-side conversation files are lost; and a
conversation over its context budget clears its oldest results first, saying where
each is saved."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor, Worker

from lw_temporal import (
    AgentInput,
    AgentResult,
    LittleWorkflowPlugin,
    ModelRequest,
    Role,
    ToolCall,
    WorkflowDefinition,
)
from lw_temporal.ids import AgentId, DataLayout
from lw_temporal.options import ModelCallOptions
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import lw_worker
from .conftest import plugin_client

LONG = WorkflowDefinition(id="long", max_turns=20)
TURNS = 8
PLUGINS: list[LittleWorkflowPlugin] = []


def _print(turn: int) -> str:
    """A command whose 1.9 KB output names its turn on every line."""
    line = f"turn-{turn:02d} line %02d .....................\\n"
    return f"for i in $(seq 1 50); do printf '{line}' $i; done"


def _expected(turn: int) -> str:
    return "".join(f"turn-{turn:02d} line {i:02d} .....................\n" for i in range(1, 51))


def _model(
    data_dir: Path, seen: list[ModelRequest], *, lose_at: int | None = None
) -> ScriptedModel:
    def step(request: ModelRequest) -> list[ToolCall]:
        seen.append(request)
        if request.turn == lose_at:
            # As a worker on another data dir (or after a cleaned .lw) would find it.
            shutil.rmtree(DataLayout.at(data_dir).state / "conversations")
            for plugin in PLUGINS:
                plugin.model_activities.conversations.forget()
        if request.turn < TURNS:
            return [tool("bash", command=_print(request.turn))]
        return [tool("finish", summary="done")]

    return ScriptedModel({("long", Role.PLANNER): [step] * (TURNS + 1)})


async def test_every_result_stays_in_full_across_continue_as_new_and_a_lost_store(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    seen: list[ModelRequest] = []
    run = AgentId.planner("long", task_queue)
    plugin = LittleWorkflowPlugin(data_dir, [LONG], model=_model(data_dir, seen, lose_at=5))
    PLUGINS.append(plugin)
    client = plugin_client(dev_env, plugin)
    async with Worker(client, task_queue=task_queue):
        result = await client.execute_workflow(
            "lw.Planner",
            AgentInput(task="print a lot", turns_per_run=3),
            id=str(run),
            task_queue=task_queue,
            result_type=AgentResult,
        )
    PLUGINS.remove(plugin)
    assert result.summary == "done" and result.turns == TURNS + 1
    # Turn 6 ran after the files were deleted: the workflow resent what it holds
    # (everything since the last continue-as-new, and its carried tail before that).
    last = seen[-1]
    assert last.turn == TURNS and last.task == "print a lot"
    results = last.tool_results()
    assert [r.turn for r in results] == list(range(TURNS))
    for turn, entry in enumerate(results):
        assert _expected(turn) in entry.text, (turn, entry.text[:200])
        assert not entry.is_error
    # Each result is bound to the id of the call it answers.
    for exchange in last.history:
        assert [c.id for c in exchange.reply.tool_calls] == [r.call_id for r in exchange.results]
    # The files were rebuilt: turn 1's file exists again although turn 6 deleted them all.
    conversations = DataLayout.at(data_dir).state / "conversations"
    assert len(list(conversations.rglob("turn-000000.json"))) == 1
    assert len(list(conversations.rglob("turn-*.json"))) == TURNS + 1
    assert "/mnt/scratch/own/" in last.mounts and last.system_prompt().count(last.mounts) == 1


async def test_over_budget_the_oldest_results_are_cleared_and_saved(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    seen: list[ModelRequest] = []
    run = AgentId.planner("long", task_queue)
    model = _model(data_dir, seen)
    async with lw_worker(
        dev_env,
        data_dir,
        task_queue,
        [LONG],
        model,
        model_calls=ModelCallOptions(context_budget_tokens=5_000),
    ) as client:
        await client.execute_workflow(
            "lw.Planner", "print a lot", id=str(run), task_queue=task_queue
        )
    last = seen[-1]
    results = last.tool_results()
    assert last.cleared_results > 0
    cleared, kept = results[: last.cleared_results], results[last.cleared_results :]
    assert all(_expected(r.turn) in r.text for r in kept)
    scratch = DataLayout.at(data_dir).scratch(run)
    for entry in cleared:
        assert entry.text.startswith("[cleared to fit the context budget"), entry.text
        where = entry.text.split(" saved in ")[1].split(":")[0]
        saved = scratch / where.removeprefix("/mnt/scratch/own/")
        assert _expected(entry.turn) in saved.read_text()
    # The newest results are never cleared, and clearing only ever grows.
    assert results[-1].turn == TURNS - 1 and results[-1] in kept
    counts = [r.cleared_results for r in seen]
    assert counts == sorted(counts)


class _LoseRecords(Interceptor):
    """Deletes each tool result the worker recorded, as a worker on another data dir
    would never have it."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        root = self.root

        class Inbound(ActivityInboundInterceptor):
            async def execute_activity(self, input: ExecuteActivityInput) -> Any:
                result = await self.next.execute_activity(input)
                for record in root.rglob("results/*/*.txt"):
                    record.unlink()
                return result

        return Inbound(next)


async def test_results_not_recorded_on_the_worker_are_resent_in_full(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    seen: list[ModelRequest] = []
    run = AgentId.planner("long", task_queue)
    plugin = LittleWorkflowPlugin(data_dir, [LONG], model=_model(data_dir, seen))
    client = plugin_client(dev_env, plugin)
    lose = _LoseRecords(DataLayout.at(data_dir).state / "conversations")
    async with Worker(client, task_queue=task_queue, interceptors=[lose]):
        await client.execute_workflow(
            "lw.Planner", "print a lot", id=str(run), task_queue=task_queue
        )
        history = await client.get_workflow_handle(str(run)).fetch_history()
    # Every turn after the first asked for its results again (a failed model attempt).
    asked = [e for e in history.events if "LwConversationMissing" in str(e)]
    assert len(asked) == TURNS, len(asked)
    results = seen[-1].tool_results()
    assert [r.turn for r in results] == list(range(TURNS))
    assert all(_expected(r.turn) in r.text for r in results)
