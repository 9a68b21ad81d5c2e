"""A model call answered within a few seconds sends the server no heartbeat: the first
beat of ``lw.model`` comes after ``_HEARTBEAT_SECONDS`` (still well inside its heartbeat
timeout), so a fast turn costs one request less."""

from __future__ import annotations

import asyncio
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, ModelRequest, ModelResponse
from lw_temporal.options import ModelCallOptions
from lw_temporal.testing import tool

from ._hierarchy_support import lw_worker


class _Held:
    """Finishes at once, but only when the test lets it answer."""

    local_activity = False

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.answer = asyncio.Event()

    async def next_turn(self, request: ModelRequest) -> ModelResponse:
        self.asked.set()
        await self.answer.wait()
        return ModelResponse(text="done", tool_calls=[tool("finish", summary="quiet")])


async def test_a_fast_model_call_sends_no_heartbeat(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    model = _Held()
    async with lw_worker(
        dev_env,
        data_dir,
        task_queue,
        [],
        model,
        model_calls=ModelCallOptions(local_activity=False),
    ) as client:
        handle = await client.start_workflow(
            "lw.Orchestrator",
            AgentInput(),
            id=f"pipeline_{task_queue}",
            task_queue=task_queue,
            result_type=AgentResult,
        )
        await asyncio.wait_for(model.asked.wait(), timeout=60)
        await asyncio.sleep(1.5)  # time enough for an immediate beat to reach the server
        described = await handle.describe()
        [pending] = described.raw_description.pending_activities
        assert pending.activity_type.name == "lw.model"
        assert not pending.HasField("last_heartbeat_time"), pending.last_heartbeat_time
        model.answer.set()
        result = await handle.result()
        assert result.summary == "quiet"
