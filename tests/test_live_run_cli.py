"""``lw-temporal run`` starts a run on a server, follows its tree until it ends and
exits 0 when everything in it succeeded, non-zero naming each workflow that failed;
``lw-temporal status`` shows one snapshot. Piped, the tree is plain lines; on a
terminal it is redrawn in place. The worker here is ``lw-temporal worker`` itself,
with its Prometheus endpoint."""

from __future__ import annotations

import asyncio
import os
import pty
import re
import urllib.request
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from lw_temporal._cli._demo_run import _free_port

from ._live_support import CLI, ROOT, address, lw, worker_process

TASK_QUEUE = "live-run"


@pytest_asyncio.fixture(scope="module")
async def metrics_port(
    dev_env: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[int]:
    """A real ``lw-temporal worker`` process serving the test definitions."""
    port = _free_port()
    data_dir = tmp_path_factory.mktemp("live-data")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LW_DATA_DIR", str(data_dir))  # the CLI opens payloads with its keys
        async with worker_process(
            dev_env,
            data_dir,
            TASK_QUEUE,
            "--metrics-port",
            str(port),
            "--metrics-host",
            "127.0.0.1",
        ):
            yield port


async def test_a_run_that_succeeds_shows_its_tree_and_exits_0(
    dev_env: WorkflowEnvironment, metrics_port: int
) -> None:
    code, out, err = await lw(
        dev_env, "run", "steady", "Do it.", "--task-queue", TASK_QUEUE, "--id", "ok-1"
    )
    assert code == 0, (out, err)
    assert "starting lw.Planner run_steady@ok-1" in out
    # Piped: plain timestamped lines as the tree changes, then the final tree.
    assert re.search(r"^\[\s*\d+\.\ds\] run_steady@ok-1  planner steady  ", out, re.M)
    assert "\x1b[" not in out
    tree = out[out.index("run tree:") :]
    assert re.search(r"^run_steady@ok-1  planner steady  finished  3 turns  ", tree, re.M)
    for step in ("step_1", "step_2"):
        assert re.search(rf"^  {step}  worker steady  finished  2 turns  step done", tree, re.M)
    assert re.search(r"^run_steady@ok-1 finished in \d+\.\ds: steady done$", out, re.M)
    assert out.rstrip().splitlines()[-1] == (
        "tokens, whole tree: 0 input (0 cached), 0 output tokens in 7 model calls"
    )
    assert err == ""

    code, out, err = await lw(dev_env, "status", "run_steady@ok-1")
    assert code == 0, err
    assert "run_steady@ok-1  planner steady  finished" in out
    assert "  step_2  worker steady  finished" in out


async def test_a_pipeline_run_shows_planners_under_the_orchestrator(
    dev_env: WorkflowEnvironment, metrics_port: int
) -> None:
    code, out, err = await lw(
        dev_env, "run", "--pipeline", "Go.", "--task-queue", TASK_QUEUE, "--id", "p-1"
    )
    assert code == 0, (out, err)
    tree = out[out.index("run tree:") :]
    assert re.search(r"^pipeline_p-1  orchestrator pipeline  finished", tree, re.M)
    assert re.search(r"^  run_steady@1  planner steady  finished", tree, re.M)
    assert re.search(r"^    step_1  worker steady  finished", tree, re.M)


async def test_a_failing_step_is_named_and_the_exit_code_is_non_zero(
    dev_env: WorkflowEnvironment, metrics_port: int
) -> None:
    code, out, err = await lw(
        dev_env, "run", "shaky", "Try.", "--task-queue", TASK_QUEUE, "--id", "bad-1"
    )
    assert code == 1, (out, err)
    assert "  step_1  FAILED" in out or re.search(r"step_1  worker shaky  FAILED", out)
    assert "lw-temporal: workflow run_shaky@bad-1/steps/step_1 failed: " in err
    assert "ScriptedModel has no script for definition 'shaky'" in err

    code, out, err = await lw(dev_env, "status", "run_shaky@bad-1")
    assert code == 1
    assert "run_shaky@bad-1/steps/step_1 failed" in err


async def test_a_run_that_fails_names_its_workflow(
    dev_env: WorkflowEnvironment, metrics_port: int
) -> None:
    code, out, err = await lw(
        dev_env,
        "run",
        "unserved",
        "Nobody serves this.",
        "--task-queue",
        TASK_QUEUE,
        "--id",
        "x-1",
    )
    assert code == 1, (out, err)
    assert "lw-temporal: workflow run_unserved@x-1 failed: " in err
    assert "unserved" in err.split("failed: ", 1)[1]


async def test_bad_arguments_and_unknown_workflows_are_clear_errors(
    dev_env: WorkflowEnvironment,
) -> None:
    code, _, err = await lw(dev_env, "run", "Not A Definition", "task")
    assert code != 0 and "definition" in err
    code, _, err = await lw(dev_env, "run", "--pipeline", "a", "b")
    assert code == 2 and 'lw-temporal run --pipeline "TASK"' in err
    code, _, err = await lw(dev_env, "status", "run_nothing@here")
    assert code == 1 and "no workflow 'run_nothing@here'" in err
    code, _, err = await lw(dev_env, "status", "")
    assert code == 2 and err.startswith("lw-temporal status: workflow ID is empty")


async def test_on_a_terminal_the_tree_is_redrawn_in_place(
    dev_env: WorkflowEnvironment, metrics_port: int
) -> None:
    leader, follower = pty.openpty()
    process = await asyncio.create_subprocess_exec(
        CLI,
        "run",
        "steady",
        "Do it.",
        "--task-queue",
        TASK_QUEUE,
        "--id",
        "tty-1",
        "--address",
        address(dev_env),
        cwd=ROOT,
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    chunks: list[bytes] = []

    def read_all() -> None:
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:
                return
            if not data:
                return
            chunks.append(data)

    reader = asyncio.get_running_loop().run_in_executor(None, read_all)
    assert await asyncio.wait_for(process.wait(), timeout=120) == 0
    await asyncio.wait_for(reader, timeout=30)
    os.close(leader)
    screen = b"".join(chunks).decode()
    assert "\x1b[" in screen and "F\x1b[J" in screen  # cursor up, clear below
    assert "run tree:" not in screen and "[  " not in screen
    assert "step_2  worker steady  finished" in screen


async def test_the_worker_serves_lw_metrics_on_its_prometheus_port(
    dev_env: WorkflowEnvironment, metrics_port: int
) -> None:
    code, _, err = await lw(
        dev_env, "run", "steady", "Again.", "--task-queue", TASK_QUEUE, "--id", "m-1"
    )
    assert code == 0, err
    code, _, err = await lw(
        dev_env, "run", "probing", "Look.", "--task-queue", TASK_QUEUE, "--id", "m-2"
    )
    assert code == 3, err
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    text = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=10).read().decode())
    samples = {
        line.split("{")[0].split(" ")[0]: line
        for line in text.splitlines()
        if line.startswith("lw_")
    }
    for name in (
        "lw_bash_commands",
        "lw_bash_rejections",
        "lw_bash_duration_bucket",
        "lw_memory_bytes_written",
        "lw_model_turns",
    ):
        assert name in samples, (name, sorted(samples))
    assert re.search(
        r'^lw_bash_rejections\{[^}]*reason="path is outside the allowed roots"', text, re.M
    )
    assert re.search(r'^lw_memory_bytes_written\{[^}]*store_kind="workflow"[^}]*\} \d+', text, re.M)
    assert re.search(r"^temporal_", text, re.M)  # the SDK's own metrics on the same endpoint


async def test_a_run_nobody_serves_says_a_worker_may_be_missing(
    dev_env: WorkflowEnvironment,
) -> None:
    process = await asyncio.create_subprocess_exec(
        CLI, "run", "steady", "Wait.", "--task-queue", "nobody-polls-this", "--id", "lonely-1",
        "--address", address(dev_env), "--without-worker", "--no-keys",
        cwd=ROOT, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        seen = b""
        while b"is a worker with the lw plugin polling" not in seen:
            line = await asyncio.wait_for(process.stdout.readline(), timeout=60)
            assert line, seen
            seen += line
        assert b"run_steady@lonely-1  starting" in seen
    finally:
        process.terminate()
        await process.wait()
        await dev_env.client.get_workflow_handle("run_steady@lonely-1").terminate()


def test_a_tree_line_says_what_an_agent_is_doing_and_what_it_spent() -> None:
    from temporalio.client import WorkflowExecutionStatus

    from lw_temporal._live import Node
    from lw_temporal.ids import Progress
    from lw_temporal.models import Usage

    progress = Progress(
        workflow_id="pipeline_a/sub-runs/run_review@1",
        role="planner",
        definition_id="review",
        status="running tools",
        turn=2,
        max_turns=12,
        running=["bash"],
        usage=Usage(input_tokens=1200, output_tokens=340, cached_tokens=800),
    )
    running = Node(progress.workflow_id, 1, progress, WorkflowExecutionStatus.RUNNING)
    assert running.line() == (
        "  run_review@1  planner review  running tools (bash)  turn 3/12  "
        "tokens 1200 in / 340 out (800 cached)"
    )
    done = progress.model_copy(update={"status": "finished", "turn": 4, "summary": "ok"})
    closed = Node(progress.workflow_id, 1, done, WorkflowExecutionStatus.COMPLETED)
    assert closed.line() == (
        "  run_review@1  planner review  finished  4 turns  tokens 1200 in / 340 out "
        "(800 cached)  ok"
    )
    failed = Node("pipeline_a/sub-runs/run_x@2", 1, None, WorkflowExecutionStatus.FAILED)
    assert failed.failed and failed.line() == "  run_x@2  FAILED"
