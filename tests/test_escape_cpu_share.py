"""Escape class: taking the host's CPU from the worker and the other agents.

One agent's command starts 100 busy loops, each in a session of its own (``setsid``):
the kernel's autogroup shares the CPU between sessions, not between processes, so
without a CPU group of its own a command of 100 sessions got 100 shares to another
agent's one (measured: another agent's 0.1 s of work took 1.5 s beside 40 such loops,
and its 0.06 s command 4 s beside 100). Each command is now one CPU group, weighed as
one against each other command (and all of them as one against the worker). While
the loops spin, another agent's CPU-bound work and a third agent's ``echo`` must
finish in about the time they take alone, on both backends; then the busy agent's
command ends and the worker serves the next one."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests._bash_support import SANDBOXES
from tests._escape_support import running

BUSY = "pipeline_cb/sub-runs/run_cr@1/steps/step_1"
WORKER = "pipeline_cw/sub-runs/run_cr@1/steps/step_1"
OTHER = "pipeline_co/sub-runs/run_cr@1/steps/step_1"
LOOPS = (
    "for i in $(seq 100); do setsid sh -c 'while :; do :; done' & done; touch ready; "
    "while [ ! -e stop ]; do sleep 0.2; done; echo stopped"
)
WORK = "python3 -c 'print(sum(range(4 * 10**6)))'"


async def _timed(bash: object, agent: str, command: str) -> float:
    start = time.monotonic()
    result = await bash.one(agent, command)  # type: ignore[attr-defined]
    assert result.exit_code == 0, result
    return time.monotonic() - start


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_busy_sessions_leave_the_others_their_share(
    dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str
) -> None:
    async with running(dev_env, data_dir, sandbox) as (bash, plugin):
        for agent in (BUSY, WORKER, OTHER):
            await bash.one(agent, "true")
        alone = min([await _timed(bash, WORKER, WORK) for _ in range(3)])
        echo_alone = min([await _timed(bash, OTHER, "echo alive") for _ in range(3)])
        scratch = plugin.config.scope_of(BUSY, "lw.Worker").own_scratch
        busy = asyncio.ensure_future(bash.one(BUSY, LOOPS, timeout_seconds=60))
        try:
            for _ in range(300):
                if (scratch / "ready").exists() or busy.done():
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(1)  # every loop spinning
            beside = await _timed(bash, WORKER, WORK)
            echo_beside = await _timed(bash, OTHER, "echo alive")
        finally:
            (scratch / "stop").touch()
            result = await busy
        after = await bash.one(OTHER, "echo alive")
    assert result.stdout.endswith("stopped\n"), result
    # alone about 0.2 s and 0.2 s; 100 sessions beside them made it 15x and more
    assert beside < 3 * alone + 0.5, (alone, beside)
    assert echo_beside < 3 * echo_alone + 0.5, (echo_alone, echo_beside)
    assert after.stdout == "alive\n"
