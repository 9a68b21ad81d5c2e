"""Traces never carry a failure's message: Temporal's spans recorded each failure with
its text (status ``ApplicationError: <message>`` and an exception event with the message
and the chained traceback), and a model's refusal quotes its reply, here the task's
name. They now name the failure's kind only, as lw's own spans do."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from opentelemetry.trace import StatusCode
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput
from lw_temporal.models import MODEL_REFUSED

from ._hierarchy_support import lw_worker
from ._model_support import model_pair
from ._privacy_support import PLANTED, refusing_brain, secret_definition
from .conftest import Traces


async def test_a_refusal_reaches_no_span_with_its_text(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str, traces: Traces
) -> None:
    definition = secret_definition()
    run = f"run_{definition.id}@{uuid.uuid4().hex[:6]}"

    _, model = model_pair("openai", refusing_brain)
    async with lw_worker(
        dev_env, data_dir, task_queue, [definition], model, tracing=traces.provider
    ) as client:
        handle = await client.start_workflow(
            "lw.Planner", AgentInput(task=f"review {PLANTED}"), id=run, task_queue=task_queue
        )
        with pytest.raises(WorkflowFailureError):
            await handle.result()

    spans = traces.finished()
    assert spans
    for span in spans:
        assert PLANTED not in span.to_json(), span.name
    # What the failure was stays: which span failed, as what kind, and where.
    [model_span] = [s for s in spans if s.name == "RunActivity:lw.model" and not s.status.is_ok]
    assert model_span.status.status_code == StatusCode.ERROR
    assert model_span.status.description == "ApplicationError"
    [event] = [e for e in model_span.events if e.name == "exception"]
    assert event.attributes is not None
    assert event.attributes["exception.message"] == MODEL_REFUSED
    assert "_activity.py" in str(event.attributes["exception.stacktrace"])
