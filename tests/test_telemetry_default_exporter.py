"""``tracing=True`` with its defaults on a root worker: the sample pipeline's real
sandboxed commands all succeed (whatever the sandbox forks runs no library's at-fork
hook: OpenTelemetry's batch processor, and one more that starts a thread), and with no
collector at the OTLP endpoint the worker says so once and drops the spans, quietly."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal._cli._demo_run import _free_port

from ._live_support import CLI, ROOT, address, lw


async def test_a_traced_worker_without_a_collector_runs_every_command(
    dev_env: WorkflowEnvironment, tmp_path: Path, task_queue: str
) -> None:
    endpoint = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    environ = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    worker = await asyncio.create_subprocess_exec(
        CLI, "worker", "--address", address(dev_env), "--task-queue", task_queue,
        "--data-dir", str(tmp_path / "data"), "--create", "--tracing",
        "--definitions", "tests._fork_hook_support:DEFINITIONS",
        "--model", "workflows.pipeline:sample_model",
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**environ, "PYTHONPATH": str(ROOT), "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
             "OTEL_BSP_SCHEDULE_DELAY": "100"},
    )  # fmt: skip
    assert worker.stdout is not None
    ready = await asyncio.wait_for(worker.stdout.readline(), 120)
    assert ready.startswith(b"ready:") and f"spans to {endpoint}/v1/traces".encode() in ready
    try:
        for run in ("a", "b"):
            code, out, err = await lw(
                dev_env, "run", "--pipeline", "Review Dana Reyes.", "--task-queue", task_queue,
                "--id", run,
            )  # fmt: skip
            # 0: every workflow succeeded and no tool call failed (3 otherwise).
            assert code == 0, (out, err)
            assert "failed tool calls" not in out
    finally:
        worker.terminate()
        _, stderr = await asyncio.wait_for(worker.communicate(), 60)
    lines = stderr.decode().splitlines()
    assert lines == [
        f"no OpenTelemetry collector at {endpoint}/v1/traces: spans are dropped until one "
        "answers (looked for again every 60 s); set OTEL_EXPORTER_OTLP_ENDPOINT to send them "
        "elsewhere, or OTEL_TRACES_EXPORTER=none"
    ], lines
