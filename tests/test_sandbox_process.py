"""Process control of lw.bash on a real server: timeouts and cancellation leave no
process behind, output is capped and saved, bytes survive, limits hold."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._sandbox import landlock_abi
from lw_temporal._sandbox._run import _pids_base
from lw_temporal.options import BashOptions, Limits
from tests._bash_support import bash_worker


def worker_id() -> str:
    """A fresh step ID per test, so a failed test cannot block the next one."""
    return f"pipeline_proc-{uuid.uuid4().hex[:8]}/sub-runs/run_cr@1/steps/step_1"


def processes_with(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(pid))
    return found


def running_exactly(command: str) -> bool:
    """Whether a process whose whole command line is ``command`` runs."""
    wanted = command.replace(" ", "\0").encode() + b"\0"
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if Path(f"/proc/{pid}/cmdline").read_bytes() == wanted:
                    return True
            except OSError:
                continue
    return False


async def wait_until(predicate: object, within: float = 60) -> bool:
    assert callable(predicate)
    for _ in range(int(within * 10)):
        if predicate():
            return True
        await asyncio.sleep(0.1)
    return bool(predicate())


def make_plugin(data_dir: Path, sandbox: str = "bwrap") -> LittleWorkflowPlugin:
    return LittleWorkflowPlugin(
        data_dir,
        [WorkflowDefinition(id="cr")],
        sandbox=sandbox,
        bash=BashOptions(
            output_cap=1000, limits=Limits(file_size=1 << 20, tmp_size=8 << 20, pids=128)
        ),
    )


BACKENDS = [
    "bwrap",
    pytest.param(
        "landlock",
        marks=pytest.mark.skipif(landlock_abi() < 6, reason="needs Landlock ABI 6+"),
    ),
]


@pytest.fixture(params=BACKENDS)
def any_plugin(request: pytest.FixtureRequest, data_dir: Path) -> LittleWorkflowPlugin:
    """The same behaviour is required of every kernel backend."""
    return make_plugin(data_dir, request.param)


@pytest.fixture
def plugin(data_dir: Path) -> LittleWorkflowPlugin:
    return make_plugin(data_dir)


async def test_timeout_kills_the_whole_tree(
    dev_env: WorkflowEnvironment, any_plugin: LittleWorkflowPlugin
) -> None:
    worker = worker_id()
    tag = str(9000 + uuid.uuid4().int % 900)
    command = (
        f"sleep {tag}1 & setsid sleep {tag}2 & (nohup sleep {tag}3 >/dev/null &); "
        f"sh -c 'sleep {tag}4 & wait' & sleep {tag}5"
    )
    async with bash_worker(dev_env, any_plugin) as bash:
        result = await bash.one(worker, command, timeout_seconds=2)
    assert result.timed_out and result.exit_code == 124
    assert "timed out" in result.stderr
    assert await wait_until(lambda: processes_with(f"sleep {tag}") == [], 30)


async def test_cancellation_kills_the_whole_tree(
    dev_env: WorkflowEnvironment, any_plugin: LittleWorkflowPlugin
) -> None:
    worker = worker_id()
    tag = str(8000 + uuid.uuid4().int % 900)
    async with bash_worker(dev_env, any_plugin) as bash:
        command = f"sleep {tag}1 & setsid sleep {tag}2 & sleep {tag}3"
        running = asyncio.ensure_future(bash.one(worker, command, timeout_seconds=600))
        assert await wait_until(
            lambda: all(running_exactly(f"sleep {tag}{i}") for i in (1, 2, 3)), 60
        )
        handle = await bash.sessions.handle(worker)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        with contextlib.suppress(Exception):  # the update ends with its run
            await running
        assert await wait_until(lambda: processes_with(f"sleep {tag}") == [], 60)


async def test_output_is_capped_saved_and_bytes_survive(
    dev_env: WorkflowEnvironment, any_plugin: LittleWorkflowPlugin
) -> None:
    worker = worker_id()
    async with bash_worker(dev_env, any_plugin) as bash:
        big, raw = await bash.run(
            worker,
            [
                "head -c 5000 /dev/zero | tr '\\0' a",
                "printf 'caf\\xc3\\xa9 \\xff\\xfe'; printf '\\x80' >&2",
            ],
        )
    assert big.stdout_truncated and not big.stderr_truncated
    assert big.stdout == "a" * 1000 and big.stdout_bytes == 5000
    assert big.stdout_ref is not None and big.stdout_ref.startswith("/mnt/scratch/own/")
    scope = any_plugin.config.scope_of(worker, "lw.Worker")
    saved = scope.to_real(big.stdout_ref)
    assert saved is not None and saved.read_bytes() == b"a" * 5000
    assert raw.stdout == "café \\xff\\xfe" and raw.stderr == "\\x80"
    assert raw.stdout_ref is None


async def test_file_size_and_tmp_limits_hold(
    dev_env: WorkflowEnvironment, plugin: LittleWorkflowPlugin
) -> None:
    worker = worker_id()
    async with bash_worker(dev_env, plugin) as bash:
        yes, tmp = await bash.run(
            worker,
            [
                "yes > big.txt",
                "for i in $(seq 40); do head -c 500000 /dev/zero > /tmp/f$i || exit 7; done",
            ],
            timeout_seconds=60,
        )
    assert yes.exit_code != 0 and not yes.timed_out
    scope = plugin.config.scope_of(worker, "lw.Worker")
    assert (scope.own_scratch / "big.txt").stat().st_size <= 1 << 20
    assert tmp.exit_code == 7 and "No space left" in tmp.stderr


@pytest.mark.skipif(_pids_base() is None, reason="no writable pids cgroup on this host")
async def test_fork_bomb_is_contained(
    dev_env: WorkflowEnvironment, plugin: LittleWorkflowPlugin
) -> None:
    worker = worker_id()
    async with bash_worker(dev_env, plugin) as bash:
        bomb = await bash.one(worker, "b() { b | b & }; b; sleep 3", timeout_seconds=8)
        after = await bash.one(worker, "echo alive")
    assert "Resource temporarily unavailable" in bomb.stderr  # the pids limit refused forks
    assert after.stdout == "alive\n"
    assert await wait_until(lambda: processes_with("b | b") == [], 30)
