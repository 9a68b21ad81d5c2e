"""Escape class: memory of all commands together. Every command cgroup lies under one
worker-wide parent bounded by ``Limits.total_memory``, and tmpfs pages are charged to
the command that wrote them: a command that fills its ``TMPDIR``, or a planner that
stages hundreds of MiB in its memory mount (the staging tmpfs), is stopped at that
bound although its own limit is larger, and so are two agents that together hold more
than it. Commands are the OOM killer's first choice (``oom_score_adj`` 1000), the
worker its last. On the host: the worker is alive, its next command runs, nothing of
the stopped ones is left staged."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._sandbox._cgroups import command_cgroups
from lw_temporal._sandbox._oom import WORKER_OOM_SCORE, protect_worker
from lw_temporal.options import BashOptions, Limits
from tests._bash_support import bash_worker, staging_folder
from tests._escape_support import BACKENDS, WORKER

MIB = 1 << 20
LIMITS = Limits(
    memory=1024 * MIB, total_memory=320 * MIB, tmp_size=1024 * MIB, file_size=1024 * MIB
)
PLANNER = "run_cr@mem"
OTHER_STEP = "run_cr@mem/steps/step_2"

pytestmark = pytest.mark.skipif(
    not command_cgroups().memory, reason="no writable memory cgroup here"
)


def _plugin(data_dir: Path, backend: str) -> LittleWorkflowPlugin:
    return LittleWorkflowPlugin(
        data_dir, [WorkflowDefinition(id="cr")], sandbox=backend, bash=BashOptions(limits=LIMITS)
    )


@pytest.mark.parametrize("backend", BACKENDS)
async def test_tmpfs_pages_count_toward_all_commands_together(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    async with bash_worker(dev_env, _plugin(data_dir, backend)) as bash:
        big, after = await bash.run(
            WORKER, ['head -c 400M /dev/zero > "$TMPDIR/x" && echo wrote', "echo alive"],
            timeout_seconds=60,
        )  # fmt: skip
    assert "wrote" not in big.stdout, big
    assert big.stopped is not None and "all commands of the worker together" in big.stopped, big
    assert after.stdout == "alive\n"


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bwrap")
async def test_staged_memory_counts_toward_all_commands_together(
    dev_env: WorkflowEnvironment, data_dir: Path
) -> None:
    plugin = _plugin(data_dir, "bwrap")
    async with bash_worker(dev_env, plugin) as bash:
        big, after = await bash.run(
            PLANNER,
            ["head -c 400M /dev/zero > /mnt/memory/workflow/big && echo wrote", "echo alive"],
            timeout_seconds=60,
        )
    assert "wrote" not in big.stdout, big
    assert big.stopped is not None and "memory limit" in big.stopped, big
    assert big.memory_changes == ()
    assert after.stdout == "alive\n"
    assert not (data_dir / "memory/workflows/cr/big").exists()
    staged = [p for p in staging_folder(plugin).rglob("big")]
    assert staged == []  # the used staging folder went with it


@pytest.mark.parametrize("backend", BACKENDS)
async def test_two_agents_together_cannot_take_more_than_the_bound(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    hold = (
        "python3 -c 'import os, time\n"
        'b = b"x" * (200 << 20)\n'
        'while not os.path.exists("stop"): time.sleep(0.05)\n'
        'print("held")\''
    )
    plugin = _plugin(data_dir, backend)
    async with bash_worker(dev_env, plugin) as bash:
        await bash.run(WORKER, ["true"])
        await bash.run(OTHER_STEP, ["true"])
        scope = plugin.config.scope_of
        scratches = [scope(a, "lw.Worker").own_scratch for a in (WORKER, OTHER_STEP)]
        first = asyncio.ensure_future(bash.one(WORKER, hold, timeout_seconds=60))
        scores = await _scores_of_running(_uid(scratches[0]))
        second = asyncio.ensure_future(bash.one(OTHER_STEP, hold, timeout_seconds=60))
        await asyncio.wait({first, second}, return_when=asyncio.FIRST_COMPLETED)
        for scratch in scratches:  # one was killed: let the other go
            _touch(scratch / "stop")
        results = [await first, await second]
        after = await bash.one(OTHER_STEP, "echo alive")
    killed = [r for r in results if r.stopped and "memory limit" in r.stopped]
    assert killed, results  # 400 MiB together is over the 320 MiB bound
    assert scores and set(scores) == {1000}, scores
    if protect_worker():  # where it may (CAP_SYS_RESOURCE)
        assert _own_score() <= WORKER_OOM_SCORE
    assert after.stdout == "alive\n"


def _uid(path: Path) -> int:
    return path.stat().st_uid


async def _scores_of_running(uid: int) -> list[int]:
    """The OOM scores of the processes of ``uid`` once its python has started."""
    for _ in range(600):
        found, started = _scores(uid)
        if started:
            return found
        await asyncio.sleep(0.05)
    return []


def _scores(uid: int) -> tuple[list[int], bool]:
    found: list[int] = []
    started = False
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/status") as status:
                line = next(x for x in status if x.startswith("Uid:"))
            if str(uid) not in line.split()[1:]:
                continue
            with open(f"/proc/{pid}/oom_score_adj") as score:
                found.append(int(score.read()))
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                started = started or b"python3" in cmdline.read()
        except (OSError, StopIteration):
            continue
    return found, started


def _touch(path: Path) -> None:
    path.touch()


def _own_score() -> int:
    with open("/proc/self/oom_score_adj") as score:
        return int(score.read())
