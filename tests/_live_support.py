"""Definitions and a scripted model for the ``lw-temporal run``/``status`` and worker
metrics tests: ``steady`` succeeds (commands, memory, two steps), ``shaky`` starts a
step that fails (its model has no script for it), ``probing`` runs a command the
pre-check refuses (a failed tool call), ``sleepy`` runs a command that takes minutes."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import Role, WorkflowDefinition
from lw_temporal.testing import ScriptedModel, tool

ROOT = Path(__file__).resolve().parent.parent
CLI = str(Path(sys.executable).parent / "lw-temporal")

DEFINITIONS = (
    WorkflowDefinition(id="steady", instructions="Do two small steps."),
    WorkflowDefinition(id="shaky", instructions="Start a step that cannot run."),
    WorkflowDefinition(id="probing", instructions="Read what is not yours."),
    WorkflowDefinition(id="sleepy", instructions="Wait."),
)

MODEL = ScriptedModel(
    {
        (None, Role.ORCHESTRATOR): [
            [tool("plan_workflow", workflow="steady", task="steady work")],
            [tool("finish", summary="pipeline done")],
        ],
        ("steady", Role.PLANNER): [
            [
                tool("bash", command="echo planning > /mnt/scratch/own/plan.md"),
                tool(
                    "memory_append",
                    path="/mnt/memory/workflow/lessons-learned.md",
                    content="- two steps are enough\n",
                ),
            ],
            [tool("run_step", task="first"), tool("run_step", task="second")],
            [tool("finish", summary="steady done")],
        ],
        ("steady", Role.WORKER): [
            [tool("bash", command="cat /mnt/scratch/from-planner/plan.md")],
            [tool("finish", summary="step done")],
        ],
        ("sleepy", Role.PLANNER): [
            [tool("bash", command="sleep 300", timeout_seconds=600)],
            [tool("finish", summary="woke up")],
        ],
        ("probing", Role.PLANNER): [
            [tool("bash", command="cat /etc/shadow")],
            [tool("finish", summary="probed")],
        ],
        ("shaky", Role.PLANNER): [
            [tool("run_step", task="doomed")],
            [tool("finish", summary="shaky done, one step failed")],
        ],
    }
)


def address(env: WorkflowEnvironment) -> str:
    return env.client.service_client.config.target_host


@asynccontextmanager
async def worker_process(
    env: WorkflowEnvironment,
    data_dir: Path,
    task_queue: str,
    *options: str,
    environ: Mapping[str, str] | None = None,
    definitions: str = "tests._live_support:DEFINITIONS",
    model: str = "tests._live_support:MODEL",
) -> AsyncIterator[None]:
    """``lw-temporal worker`` serving these definitions (or ``definitions`` with
    ``model``), as a process, until the block ends."""
    worker = await asyncio.create_subprocess_exec(
        CLI,
        "worker",
        "--address",
        address(env),
        "--task-queue",
        task_queue,
        "--data-dir",
        str(data_dir),
        "--definitions",
        definitions,
        "--model",
        model,
        *options,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        # The console script does not put the working directory on sys.path.
        env={**os.environ, **(environ or {}), "PYTHONPATH": str(ROOT)},
    )
    assert worker.stdout is not None
    line = await asyncio.wait_for(worker.stdout.readline(), timeout=60)
    assert line.startswith(b"ready:"), line
    try:
        yield
    finally:
        worker.terminate()
        await asyncio.wait_for(worker.wait(), timeout=30)


async def lw(
    env: WorkflowEnvironment, *args: str, environ: Mapping[str, str] | None = None
) -> tuple[int, str, str]:
    """Run ``lw-temporal <args> --address <env>``: exit code, stdout, stderr."""
    process = await asyncio.create_subprocess_exec(
        CLI,
        *args,
        "--address",
        address(env),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(environ or {})},
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()
