"""``AnthropicModel(model=...)`` in a worker without ``ANTHROPIC_API_KEY`` (the README's
two-line switch, the key forgotten) fails the run at its first turn with
``LwModelAuth``, not retried, naming the variable. The SDK builds its client without a
key and raises a ``TypeError`` only when it sends; that was reported as
``LwModelFailed`` quoting the SDK and retried, each attempt failing the same way."""

from __future__ import annotations

from pathlib import Path

import anthropic
import httpx2
import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from lw_temporal import AgentInput, LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal.errors import MODEL_AUTH
from lw_temporal.models import AnthropicModel

from ._hierarchy_support import failure_type
from ._model_support import REQUEST, finish
from ._provider_standins import AnthropicStandIn
from .conftest import plugin_client


def _keyless(monkeypatch: pytest.MonkeyPatch) -> tuple[AnthropicStandIn, AnthropicModel]:
    for variable in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(variable, raising=False)
    standin = AnthropicStandIn(finish)
    client = anthropic.AsyncAnthropic(
        base_url="http://anthropic.standin",
        http_client=httpx2.AsyncClient(transport=standin.transport()),
    )
    return standin, AnthropicModel(client=client, model="claude-sonnet-4-6")


async def test_a_turn_without_a_key_is_a_typed_auth_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    standin, model = _keyless(monkeypatch)
    with pytest.raises(ApplicationError) as caught:
        await model.next_turn(REQUEST)
    assert (caught.value.type, caught.value.non_retryable) == (MODEL_AUTH, True)
    assert "set ANTHROPIC_API_KEY in the worker's environment" in caught.value.message
    assert standin.requests == []


async def test_a_run_without_a_key_fails_at_once_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    _, model = _keyless(monkeypatch)
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="alpha")], model=model)
    client = plugin_client(dev_env, plugin)
    async with Worker(client, task_queue=task_queue):
        handle = await client.start_workflow(
            "lw.Planner", AgentInput(), id=f"run_alpha@{task_queue}", task_queue=task_queue
        )
        assert await failure_type(handle) == MODEL_AUTH
    history = await handle.fetch_history()
    attempts = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.HasField("activity_task_started_event_attributes")
    ]
    assert attempts and max(attempts) == 1, attempts
