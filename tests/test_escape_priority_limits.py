"""Escape class: real-time scheduling and a lower nice value through the worker's own
limits. A command inherited ``RLIMIT_RTPRIO`` and ``RLIMIT_NICE`` from the worker, so a
worker started with headroom there (a service manager's ``LimitRTPRIO=``, a container's
``--ulimit rtprio=99``) let every command make itself ``SCHED_FIFO`` (a busy loop that
starves the host) or lower its nice value below other agents'. Both are now 0, soft
and hard, whatever the worker has: ``chrt`` and a negative nice are refused. (On a worker
whose own limits are already 0, as here, this holds before the change too; it guards the
worker that has them.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests._escape_support import BACKENDS, WORKER, running

PROBE = (
    "ulimit -r; ulimit -Hr; ulimit -e; ulimit -He; "
    "chrt -f 1 true 2>/dev/null; echo fifo=$?; "
    "python3 -c 'import os; os.nice(-1)' 2>/dev/null; echo nice=$?"
)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_command_has_no_real_time_or_nice_headroom(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    async with running(dev_env, data_dir, backend) as (bash, _):
        probe = await bash.one(WORKER, PROBE)
    lines = probe.stdout.split()
    assert lines[:4] == ["0", "0", "0", "0"], probe
    assert "fifo=0" not in lines and "fifo=" in probe.stdout, probe
    assert "nice=0" not in lines and "nice=" in probe.stdout, probe
