"""Replay with encryption on: a history recorded with sealed payloads replays on a
replayer holding the deployment's keys, and a history recorded in the clear (every file
under ``tests/histories/``, see test_replay_histories) replays through the same codec,
which passes unsealed payloads through. Without the keys a sealed history cannot even
be read."""

from __future__ import annotations

from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from lw_temporal import AgentInput, LittleWorkflowPlugin

from ._hierarchy_support import lw_worker
from ._privacy_support import PLANTED, planting_model, secret_definition

HISTORIES = Path(__file__).parent / "histories"


async def test_sealed_histories_replay_with_the_keys_and_only_with_them(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str, tmp_path: Path
) -> None:
    definition = secret_definition()
    run = f"run_{definition.id}@replay"
    async with lw_worker(
        dev_env, data_dir, task_queue, [definition], planting_model(definition.id)
    ) as client:
        await client.execute_workflow(
            "lw.Planner", AgentInput(task=f"review {PLANTED}"), id=run, task_queue=task_queue
        )
        recorded = (await client.get_workflow_handle(run).fetch_history()).to_json()
    assert PLANTED not in recorded and "YmluYXJ5L2VuY3J5cHRlZA" in recorded  # sealed

    history = WorkflowHistory.from_json(run, recorded)
    keyed = Replayer(workflows=[], plugins=[LittleWorkflowPlugin(data_dir, [definition])])
    result = await keyed.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure

    # The same codec passes a history recorded in the clear through unchanged.
    plain = WorkflowHistory.from_json(
        "run_candidate-review@recorded",
        (HISTORIES / "planner-standalone-continued.json").read_text(encoding="utf-8"),
    )
    from workflows.pipeline import DEFINITIONS

    clear = Replayer(workflows=[], plugins=[LittleWorkflowPlugin(data_dir, DEFINITIONS)])
    result = await clear.replay_workflow(plain, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure

    keyless = Replayer(workflows=[], plugins=[LittleWorkflowPlugin(tmp_path, [definition])])
    result = await keyless.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is not None
