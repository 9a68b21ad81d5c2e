"""The sample worker, with each worker step's first command slowed down and marked, so a
test can SIGKILL the process while a sandboxed command is running:
``lw-temporal worker ... --model tests._durability_worker:slow_steps_model``; and
:func:`start_worker`, which starts such a process for a test."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import ModelRequest, ModelResponse, Role, ToolCall
from lw_temporal.testing import ScriptedModel
from workflows.pipeline import SCRIPTS

MARKER = ".started"
SLOW_STEPS = "tests._durability_worker:slow_steps_model"
REPO = Path(__file__).resolve().parent.parent


async def start_worker(
    env: WorkflowEnvironment, task_queue: str, *roots: str, model: str = SLOW_STEPS
) -> asyncio.subprocess.Process:
    """An ``lw-temporal worker`` process on ``env``'s server, ready to poll; ``roots``
    are its data flags (``--data-dir D``, or ``--memory-root M --runs-root R --host H``)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "lw_temporal._cli",
        "worker",
        "--definitions",
        "workflows.pipeline:DEFINITIONS",
        "--model",
        model,
        "--address",
        env.client.service_client.config.target_host,
        "--task-queue",
        task_queue,
        *roots,
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        start_new_session=True,  # its own process group: a kill takes its sandboxes too
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), timeout=120)
    assert line.startswith(b"ready"), line
    return proc


class SlowStepsModel(ScriptedModel):
    async def next_turn(self, request: ModelRequest) -> ModelResponse:
        response = await super().next_turn(request)
        if request.role is not Role.WORKER or request.turn != 0:
            return response
        calls = [
            ToolCall(
                name=c.name,
                id=c.id,
                arguments={
                    **c.arguments,
                    "command": f"touch /mnt/scratch/own/{MARKER}; sleep 3\n"
                    + c.arguments["command"],
                },
            )
            if c.name == "bash"
            else c
            for c in response.tool_calls
        ]
        return ModelResponse(text=response.text, tool_calls=calls)


def slow_steps_model() -> SlowStepsModel:
    return SlowStepsModel(SCRIPTS)


async def wait_for(predicate: Callable[[], bool], within: float = 120) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting for the pipeline to get there"
        await asyncio.sleep(0.1)
