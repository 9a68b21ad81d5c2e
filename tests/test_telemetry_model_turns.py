"""Each model turn is a span with the model, its tokens (in, out, cached) and its stop
reason, and the tokens are counted by model on the Temporal runtime's metrics."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from temporalio.client import Client
from temporalio.runtime import MetricBuffer, Runtime, TelemetryConfig
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from lw_temporal import (
    AgentInput,
    AgentResult,
    LittleWorkflowPlugin,
    ModelRequest,
    ModelResponse,
    Role,
    WorkflowDefinition,
)
from lw_temporal.models import Usage
from lw_temporal.testing import ScriptedModel, tool

from .conftest import Traces

DEFINITION = WorkflowDefinition(id="counted")


class MeteredModel:
    """The script, with the usage a provider would report and a model name."""

    model = "claude-test-1"
    local_activity = False

    def __init__(self) -> None:
        self.script = ScriptedModel(
            {
                ("counted", Role.PLANNER): [
                    [tool("bash", command="echo one")],
                    [tool("finish", summary="counted")],
                ]
            }
        )

    async def next_turn(self, request: ModelRequest) -> ModelResponse:
        reply = await self.script.next_turn(request)
        usage = Usage(input_tokens=1000 + request.turn, output_tokens=50, cached_tokens=800)
        return reply.model_copy(update={"usage": usage})


async def test_model_turn_spans_and_token_metrics(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str, traces: Traces
) -> None:
    buffer = MetricBuffer(10_000)
    runtime = Runtime(telemetry=TelemetryConfig(metrics=buffer))
    plugin = LittleWorkflowPlugin(
        data_dir, [DEFINITION], model=MeteredModel(), tracing=traces.provider
    )
    client = await Client.connect(
        dev_env.client.service_client.config.target_host, plugins=[plugin], runtime=runtime
    )
    async with Worker(client, task_queue=task_queue):
        result = await client.execute_workflow(
            "lw.Planner",
            AgentInput(task="count"),
            id=f"run_counted@{task_queue}",
            task_queue=task_queue,
            result_type=AgentResult,
        )
    assert result.summary == "counted"

    turns = [dict(s.attributes or {}) for s in traces.finished() if s.name == "lw.model"]
    assert [t["lw.model.turn"] for t in turns] == [1, 2]
    for number, turn in enumerate(turns):
        assert turn["gen_ai.request.model"] == "claude-test-1"
        assert turn["gen_ai.usage.input_tokens"] == 1000 + number
        assert turn["gen_ai.usage.output_tokens"] == 50
        assert turn["gen_ai.usage.cache_read.input_tokens"] == 800
        assert turn["lw.definition_id"] == "counted" and turn["lw.role"] == "planner"
    assert turns[0]["gen_ai.response.finish_reasons"] == ("tool_use",)
    assert turns[0]["lw.model.tools"] == ("bash",)

    tokens: dict[tuple[str, str], int] = defaultdict(int)
    turn_count = 0
    for update in buffer.retrieve_updates():
        if update.metric.name == "lw_model_tokens":
            attributes = update.attributes
            tokens[(str(attributes["model"]), str(attributes["kind"]))] += int(update.value)
        elif update.metric.name == "lw_model_turns":
            turn_count += int(update.value)
    assert dict(tokens) == {
        ("claude-test-1", "input"): 2001,
        ("claude-test-1", "output"): 100,
        ("claude-test-1", "cached"): 1600,
    }
    assert turn_count == 2
