"""A failure's message and stack trace are sealed with the payloads: a model's refusal
quotes its reply (here the task's name), and the history keeps none of it in the clear;
whoever holds the keys reads the message as it was, and the history replays."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from lw_temporal import AgentInput, LittleWorkflowPlugin
from lw_temporal._failures import failure_message
from lw_temporal.models import MODEL_REFUSED

from ._hierarchy_support import lw_worker
from ._model_support import model_pair
from ._privacy_support import PLANTED, refusing_brain, secret_definition


async def test_a_refusal_quoting_the_task_is_sealed(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    definition = secret_definition()
    run = f"run_{definition.id}@{uuid.uuid4().hex[:6]}"

    _, model = model_pair("openai", refusing_brain)
    async with lw_worker(dev_env, data_dir, task_queue, [definition], model) as client:
        handle = await client.start_workflow(
            "lw.Planner", AgentInput(task=f"review {PLANTED}"), id=run, task_queue=task_queue
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        # With the keys, the refusal reads as the model gave it.
        cause = failed.value.cause.__cause__
        assert isinstance(cause, ApplicationError) and cause.type == MODEL_REFUSED
        assert f"refused to answer: I won't keep reviewing {PLANTED}" in cause.message
        assert PLANTED in await failure_message(client, run)

        history = await dev_env.client.get_workflow_handle(run).fetch_history()
        failures = [
            e.activity_task_failed_event_attributes.failure
            for e in history.events
            if e.HasField("activity_task_failed_event_attributes")
        ]
        assert [f.message for f in failures] == ["Encoded failure"]
        assert failures[0].stack_trace == ""
        for event in history.events:
            assert PLANTED.encode() not in event.SerializeToString(), event
        # Without them, the failure says it is sealed.
        shown = await failure_message(dev_env.client, run)
        assert PLANTED not in shown and "sealed" in shown

    replayer = Replayer(workflows=[], plugins=[LittleWorkflowPlugin(data_dir, [definition])])
    replayed = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None, replayed.replay_failure
