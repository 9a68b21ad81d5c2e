"""A run started with an input it cannot use fails at once, non-retryably, saying why:
``12345``, a list, ``{"task": 5}`` or a negative ``turns_per_run`` given to
``lw.Orchestrator`` or ``lw.Planner``. The SDK decodes a workflow's input before its
code runs, and such an input failed every workflow task after it, so the run stayed
Running for ever with its worker logging the same traceback. The worker still runs a
good pipeline afterwards."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, Role, WorkflowDefinition
from lw_temporal.errors import INVALID_REQUEST
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import lw_worker

CR = WorkflowDefinition(id="cr")
BAD: list[tuple[Any, str]] = [
    (12345, "valid dictionary"),
    ([1, 2], "valid dictionary"),
    ({"task": 5}, "task: Input should be a valid string"),
    ({"task": "x", "turns_per_run": -1}, "turns_per_run: Input should be greater than 0"),
]


@pytest.mark.parametrize(("workflow", "prefix"), [("lw.Orchestrator", "pipeline_"),
                                                  ("lw.Planner", "run_cr@")])  # fmt: skip
async def test_a_start_it_cannot_use_fails_the_run_saying_why(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str, workflow: str, prefix: str
) -> None:
    model = ScriptedModel({(None, Role.ORCHESTRATOR): [[tool("finish", summary="ok")]],
                           ("cr", Role.PLANNER): [[tool("finish", summary="ok")]]})  # fmt: skip
    async with lw_worker(dev_env, data_dir, task_queue, [CR], model) as client:
        for raw, said in BAD:
            workflow_id = f"{prefix}{uuid.uuid4().hex[:12]}"
            handle = await client.start_workflow(
                workflow, raw, id=workflow_id, task_queue=task_queue
            )
            with pytest.raises(WorkflowFailureError) as failed:  # not Running for ever
                await asyncio.wait_for(handle.result(), timeout=60)
            cause = failed.value.cause
            assert isinstance(cause, ApplicationError), repr(cause)
            assert cause.type == INVALID_REQUEST and cause.non_retryable, cause
            assert said in cause.message and workflow_id in cause.message, cause.message
            history = await handle.fetch_history()
            failed_tasks = [e for e in history.events if e.HasField(
                "workflow_task_failed_event_attributes")]  # fmt: skip
            assert failed_tasks == []  # failed once, as a run, not task after task
        good = await client.execute_workflow(
            workflow, AgentInput(task="go"), id=f"{prefix}{uuid.uuid4().hex[:12]}",
            task_queue=task_queue, result_type=AgentResult,
        )  # fmt: skip
        assert good.summary == "ok"
