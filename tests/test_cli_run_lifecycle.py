"""``lw-temporal run`` finishes the job: failed tool calls show in its exit status (3),
Ctrl-C stops following and says the run goes on and how to stop it, ``cancel`` stops
a run and its commands, a second start of a running ID is one line, ``status`` of a
closed tree needs no worker (it reads the histories) and survives a reader that closes
the pipe."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from ._live_support import CLI, ROOT, address, lw, worker_process


async def _until(process: asyncio.subprocess.Process, text: bytes) -> bytes:
    assert process.stdout is not None
    seen = b""
    while text not in seen:
        line = await asyncio.wait_for(process.stdout.readline(), timeout=120)
        assert line, seen
        seen += line
    return seen


async def test_run_reports_failed_tool_calls_ctrl_c_and_cancel(
    dev_env: WorkflowEnvironment, tmp_path: Path, task_queue: str
) -> None:
    queue = ("--task-queue", task_queue)
    async with worker_process(dev_env, tmp_path / "data", task_queue, "--create"):
        code, out, err = await lw(dev_env, "run", "probing", "Look.", *queue, "--id", "p1")
        assert code == 3, (out, err)
        assert "run_probing@p1  planner probing  finished  2 turns  1 failed tool calls" in out
        assert err == "lw-temporal: workflow run_probing@p1: 1 tool calls failed (answered to " \
            "its agent as errors)\n"  # fmt: skip

        run = await asyncio.create_subprocess_exec(
            CLI, "run", "sleepy", "Wait.", *queue, "--id", "s1", "--address", address(dev_env),
            cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        await _until(run, b"running tools (bash)")
        code, _, err = await lw(dev_env, "run", "sleepy", "Again.", *queue, "--id", "s1")
        assert code == 2
        assert err.startswith("lw-temporal run: a workflow run_sleepy@s1 already exists: ")
        run.send_signal(signal.SIGINT)
        _, stderr = await asyncio.wait_for(run.communicate(), timeout=60)
        assert run.returncode == 130
        assert stderr.decode().strip() == (
            "lw-temporal run: stopped following run_sleepy@s1; the run goes on. See it with "
            "lw-temporal status run_sleepy@s1, stop it with lw-temporal cancel run_sleepy@s1"
        )
        handle = dev_env.client.get_workflow_handle("run_sleepy@s1")
        assert (await handle.describe()).status is WorkflowExecutionStatus.RUNNING

        code, out, err = await lw(dev_env, "cancel", "run_sleepy@s1")
        assert code == 0, (out, err)
        assert out.splitlines()[-1] == "run_sleepy@s1: canceled"
        code, out, err = await lw(dev_env, "cancel", "run_sleepy@s1")
        assert (code, out.strip()) == (0, "run_sleepy@s1 is already closed (canceled)")
        code, _, err = await lw(dev_env, "cancel", "run_nothing@here")
        assert code == 1 and "no workflow 'run_nothing@here'" in err

        code, out, err = await lw(dev_env, "run", "--pipeline", "Go.", *queue, "--id", "h1")
        assert code == 0, (out, err)

    # No worker now: the closed tree comes from the histories.
    code, out, err = await lw(dev_env, "status", "pipeline_h1")
    assert code == 0, (out, err)
    assert out.splitlines()[1:] == [
        "pipeline_h1  orchestrator pipeline  finished  2 turns  pipeline done",
        "  run_steady@1  planner steady  finished  3 turns  steady done",
        "    step_1  worker steady  finished  2 turns  step done",
        "    step_2  worker steady  finished  2 turns  step done",
    ]
    code, out, err = await lw(dev_env, "status", "run_sleepy@s1")
    assert code == 1 and "run_sleepy@s1  CANCELED" in out
    assert "lw-temporal: workflow run_sleepy@s1 failed: CANCELED" in err

    # A reader that is gone before the first line: no traceback, the SIGPIPE status.
    process = await asyncio.create_subprocess_shell(
        f"{CLI} status pipeline_h1 --address {address(dev_env)} | true; "
        'echo "status=${PIPESTATUS[0]}"',
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        executable="/bin/bash",
    )  # fmt: skip
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=120)
    assert (stdout, stderr) == (b"status=141\n", b"")
