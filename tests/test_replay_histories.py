"""Recorded histories of every lw workflow replay on today's code through the plugin's
``Replayer`` (its payload codec on, passing the recordings' plain payloads through), and
a change to workflow code that is not replay-safe is caught.

Re-record after an intended, versioned change with ``LW_RECORD_HISTORIES=1 pytest
tests/test_replay_histories.py`` and commit ``tests/histories/``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer
from temporalio.workflow import NondeterminismError

from lw_temporal import AgentInput, AgentResult, LittleWorkflowPlugin, ToolCall
from lw_temporal._plugin import _passthrough
from lw_temporal._workflows import Planner
from lw_temporal.ids import AgentId
from lw_temporal.options import PrivacyOptions
from workflows.pipeline import DEFINITIONS, sample_model

from ._hierarchy_support import lw_worker

HISTORIES = Path(__file__).parent / "histories"
PIPELINE = AgentId.orchestrator("recorded")
REVIEW = PIPELINE.sub_run("candidate-review", "1")
#: One history per workflow type and shape: the pipeline, a planner under it, one of
#: its worker steps, a standalone planner that continued as new between turns.
RECORDED = {
    "orchestrator": str(PIPELINE),
    "planner": str(REVIEW),
    "worker": str(REVIEW.step_run("2")),
    "planner-standalone-continued": "run_candidate-review@recorded",
}


def _load(name: str) -> WorkflowHistory:
    text = (HISTORIES / f"{name}.json").read_text(encoding="utf-8")
    return WorkflowHistory.from_json(RECORDED[name], text)


@pytest.mark.skipif(
    os.environ.get("LW_RECORD_HISTORIES") != "1",
    reason="set LW_RECORD_HISTORIES=1 to re-record tests/histories/",
)
async def test_record_histories(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    # Recorded in the clear: the fixtures stay readable and need no key to replay
    # (sealed histories replay in test_privacy_replay).
    clear = PrivacyOptions(encrypt=False)
    async with lw_worker(
        dev_env, data_dir, task_queue, DEFINITIONS, sample_model(), privacy=clear
    ) as client:
        await client.execute_workflow(
            "lw.Orchestrator", AgentInput(), id=str(PIPELINE), task_queue=task_queue
        )
        await client.execute_workflow(
            "lw.Planner",
            AgentInput(turns_per_run=2),
            id=RECORDED["planner-standalone-continued"],
            task_queue=task_queue,
        )
        HISTORIES.mkdir(exist_ok=True)
        for name, workflow_id in RECORDED.items():
            # The first run of the chain: it holds the continue-as-new command.
            handle = client.get_workflow_handle(workflow_id, run_id=None)
            history = await handle.fetch_history()
            if name.endswith("continued"):
                first = history.events[0].workflow_execution_started_event_attributes
                history = await client.get_workflow_handle(
                    workflow_id, run_id=first.first_execution_run_id
                ).fetch_history()
            text = json.dumps(json.loads(history.to_json()), indent=1)
            (HISTORIES / f"{name}.json").write_text(text + "\n", encoding="utf-8")


@pytest.mark.parametrize("name", sorted(RECORDED))
async def test_recorded_history_replays(name: str, tmp_path: Path) -> None:
    replayer = Replayer(workflows=[], plugins=[LittleWorkflowPlugin(tmp_path, DEFINITIONS)])
    result = await replayer.replay_workflow(_load(name), raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure


@workflow.defn(name="lw.Planner")
class TimerFirstPlanner(Planner):
    """A "harmless" edit: wait a second before the first turn, without versioning."""

    @workflow.run
    async def run(self, agent_input: AgentInput | None = None) -> AgentResult:  # type: ignore[override]
        await workflow.sleep(timedelta(seconds=1))
        return await self._loop(agent_input)


@workflow.defn(name="lw.Planner")
class ZeroBasedStepsPlanner(Planner):
    """A subtler edit: number steps from 0, which changes every child workflow ID."""

    @workflow.run
    async def run(self, agent_input: AgentInput | None = None) -> AgentResult:  # type: ignore[override]
        return await self._loop(agent_input)

    def _child_maker(self, call: ToolCall) -> str | Callable[[str], AgentId]:
        make = super()._child_maker(call)
        if isinstance(make, str):
            return make
        return lambda token: make(str(int(token) - 1))


@pytest.mark.parametrize("changed", [TimerFirstPlanner, ZeroBasedStepsPlanner])
async def test_a_non_deterministic_change_is_caught(changed: type) -> None:
    replayer = Replayer(
        workflows=[changed],
        data_converter=pydantic_data_converter,
        workflow_runner=_passthrough(None),
    )
    with pytest.raises(NondeterminismError):
        await replayer.replay_workflow(_load("planner"))
