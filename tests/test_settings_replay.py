"""A run tree reads its worker's settings once, at the root, and hands them to its
children in their input: a replay, even on a worker configured otherwise, follows the
settings the run was started with, and no model reply carries settings."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from lw_temporal import LittleWorkflowPlugin, ModelResponse, Role, WorkflowDefinition
from lw_temporal.options import (
    DeploymentOptions,
    FileKeyStore,
    ModelCallOptions,
    PrivacyOptions,
)
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import lw_worker
from ._privacy_support import opened_one

BETA = WorkflowDefinition(id="beta", max_turns=5)
MODEL = ScriptedModel(
    {
        ("beta", Role.PLANNER): [[tool("run_step", task="b0")], [tool("finish", summary="b")]],
        ("beta", Role.WORKER): [[tool("finish", summary="did b0")]],
    }
)
WORKER_ONLY = {"index_search_attributes", "local_model", "max_turns", "pin"}


def test_a_model_reply_has_no_worker_settings() -> None:
    assert not WORKER_ONLY & set(ModelResponse.model_fields)


async def test_a_tree_replays_with_the_settings_it_started_with(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str, tmp_path: Path
) -> None:
    planner = f"run_beta@{task_queue}"
    step = f"{planner}/steps/step_1"
    async with lw_worker(
        dev_env,
        data_dir,
        task_queue,
        [BETA],
        MODEL,
        model_calls=ModelCallOptions(local_activity=True),
        deployment=DeploymentOptions(search_attributes_registered=True),
    ) as client:
        await client.execute_workflow("lw.Planner", "review", id=planner, task_queue=task_queue)
        histories = [
            await client.get_workflow_handle(workflow_id).fetch_history()
            for workflow_id in (planner, step)
        ]
    started = histories[1].events[0].workflow_execution_started_event_attributes
    inherited = json.loads((await opened_one(client, started.input.payloads[0])).data)["settings"]
    assert (inherited["local_model"], inherited["index_search_attributes"]) == (True, True)
    assert inherited["max_turns"] == {"beta": 5}

    # Another worker: regular model activities, no search attributes, a budget of one
    # turn. Re-reading its settings would schedule activities where the history has
    # local ones and stop the planner after one turn.
    # (It shares the deployment's key store, as every worker of one must.)
    other = LittleWorkflowPlugin(
        tmp_path,
        [BETA.model_copy(update={"max_turns": 1})],
        privacy=PrivacyOptions(key_store=FileKeyStore(data_dir / ".lw" / "keys")),
    )
    replayer = Replayer(workflows=[], plugins=[other])
    for history in histories:
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, (history.workflow_id, result.replay_failure)
