"""Definitions, a scripted model and a worker process for the approval tests.

``deployer`` has a rule on bash commands that deploy; its planner's first reply asks
for one command that matches and one that does not; its last turn finishes with the
results it read, so a test sees what the model was told. ``gated`` asks for two
deploys in one reply (a run that waits on a second request after the first is decided).
``memo`` has a rule on writes to its workflow memory.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import ApprovalRule, ModelRequest, Role, ToolCall, WorkflowDefinition
from lw_temporal.testing import ScriptedModel, ScriptTurn, tool

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = "echo deploy >> /mnt/scratch/own/deploy.log && echo deployed"

DEFINITIONS = (
    WorkflowDefinition(
        id="deployer",
        instructions="Deploy when asked.",
        approvals=(
            ApprovalRule(
                tool="bash",
                command=r"\bdeploy\b",
                timeout=timedelta(hours=1),
                reason="deploys need a person",
            ),
        ),
    ),
    WorkflowDefinition(
        id="gated",
        approvals=(ApprovalRule(tool="bash", command=r"deploy", approvers=("carol", "dana")),),
    ),
    WorkflowDefinition(
        id="memo",
        approvals=(ApprovalRule(tool="memory_write", store="workflow"),),
    ),
)


def _finish_with_results(request: ModelRequest) -> list[ToolCall]:
    told = " | ".join(r.text for r in request.last_results())
    return [tool("finish", summary=told)]


def _turns(*first: ToolCall) -> list[ScriptTurn]:
    return [list(first), _finish_with_results]


MODEL = ScriptedModel(
    {
        ("deployer", Role.PLANNER): _turns(
            tool("bash", command="echo prepared >> /mnt/scratch/own/steps.log"),
            tool("bash", command=DEPLOY),
        ),
        ("gated", Role.PLANNER): _turns(
            # A terminal control in the command: listed escaped, never acted on.
            tool("bash", command="echo deploy one >> /mnt/scratch/own/deploy.log # \x1b[2K"),
            tool("bash", command="echo deploy two >> /mnt/scratch/own/deploy.log"),
        ),
        ("memo", Role.PLANNER): _turns(
            tool("bash", command="echo sneaky > /mnt/memory/workflow/notes.md"),
            tool("memory_write", path="/mnt/memory/workflow/notes.md", content="kept\n"),
        ),
    }
)


def address(env: WorkflowEnvironment) -> str:
    return env.client.service_client.config.target_host


@asynccontextmanager
async def worker(
    env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> AsyncIterator[asyncio.subprocess.Process]:
    """``lw-temporal worker`` serving these definitions, in its own process group (so a
    test can SIGKILL it with its sandboxes); stopped at the end if still running."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "lw_temporal._cli",
        "worker",
        "--address",
        address(env),
        "--task-queue",
        task_queue,
        "--data-dir",
        str(data_dir),
        "--definitions",
        "tests._approvals_support:DEFINITIONS",
        "--model",
        "tests._approvals_support:MODEL",
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), timeout=120)
    assert line.startswith(b"ready"), line
    try:
        yield process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(process.wait(), timeout=60)


def kill(process: asyncio.subprocess.Process) -> None:
    os.killpg(process.pid, signal.SIGKILL)


async def lw(env: WorkflowEnvironment, *args: str) -> tuple[int, str, str]:
    """``lw-temporal ARGS --address <env>``: exit code, stdout, stderr."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "lw_temporal._cli",
        *args,
        "--address",
        address(env),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def until_listed(env: WorkflowEnvironment, workflow_id: str, count: int = 1) -> list[str]:
    """The ``approvals list`` lines of ``workflow_id`` once it has ``count`` pending."""
    for _ in range(600):
        code, out, err = await lw(env, "approvals", "list", "--workflow", workflow_id)
        assert code == 0, err
        lines = [line for line in out.splitlines() if line.startswith(workflow_id + "  ")]
        if len(lines) >= count:
            return lines
        await asyncio.sleep(0.2)
    raise AssertionError(f"{workflow_id} never listed {count} pending approvals")
