"""``lw-temporal run`` given the wrong ``--data-dir`` (another lw data dir, whose keys
the workers lack) seals the run's input with a key the worker cannot find, so the
worker fails the run's workflow task, again and again. The follower says why, from the
run's history: the worker's reason, naming the key store to give. Before, it asked
whether a worker was polling at all, while one was."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path

from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from lw_temporal import LittleWorkflowPlugin, Role, WorkflowDefinition
from lw_temporal.ids import DataLayout
from lw_temporal.testing import ScriptedModel, tool

from .conftest import plugin_client

ALPHA = WorkflowDefinition(id="alpha")
MODEL = ScriptedModel({("alpha", Role.PLANNER): [[tool("finish", summary="done")]]})


async def _lines_until(process: asyncio.subprocess.Process, needle: str) -> list[str]:
    assert process.stdout is not None
    lines: list[str] = []
    while not any(needle in line for line in lines):
        raw = await asyncio.wait_for(process.stdout.readline(), 60)
        if not raw:
            break
        lines.append(raw.decode())
    return lines


async def test_run_with_another_data_dir_says_why_the_worker_fails_it(
    dev_env: WorkflowEnvironment, tmp_path: Path, task_queue: str
) -> None:
    plugin = LittleWorkflowPlugin(tmp_path / "workers", [ALPHA], model=MODEL)
    other = tmp_path / "other"
    DataLayout.at(other).state.mkdir(parents=True)  # an lw data dir of its own
    client = plugin_client(dev_env, plugin)
    async with Worker(client, task_queue=task_queue):
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "lw_temporal._cli", "run", "alpha", "the task",
            "--id", task_queue, "--task-queue", task_queue, "--data-dir", str(other),
            "--address", dev_env.client.service_client.config.target_host,
            "--namespace", dev_env.client.namespace,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            lines = await _lines_until(process, "workflow task fails on the worker")
        finally:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            assert process.stderr is not None
            errors = (await process.stderr.read()).decode()
            await process.wait()
    said = "".join(lines)
    assert f"(run_alpha@{task_queue}'s workflow task fails on the worker: " in said, (said, errors)
    assert "which this key store does not hold: give this client the workers' key store" in said
    assert "is a worker with the lw plugin polling" not in said
