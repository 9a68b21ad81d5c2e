"""Escape class: the host's clocks and a time namespace of the command's own.

A command that could set a clock would move every process's time on the host (TLS
checks, timeouts, the worker's own deadlines, Temporal's timers), and a time
namespace (``unshare``/``clone`` with ``CLONE_NEWTIME``, then ``timens_offsets``)
would let it present its processes with clocks of its choosing. Every route is tried
raw on both backends: ``clock_settime``, ``settimeofday``, ``adjtimex`` and
``clock_adjtime`` with the time the clock already shows, ``unshare`` and ``clone`` with
``CLONE_NEWTIME``, and a write to ``/proc/self/timens_offsets``. On the host: the wall
clock kept pace with the monotonic one, and the worker serves the next command."""

from __future__ import annotations

import errno
import time
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests._bash_support import SANDBOXES
from tests._escape_support import WORKER, raw_calls, running

_NOW = "import time\nnow = ptr(struct.pack('<qq', int(time.time()), 0))\ntimex = ptr(bytes(208))"
#: (probe, call, arguments): each must be refused.
_CALLS = [
    ("clock_settime", "clock_settime", "0, now"),
    ("settimeofday", "settimeofday", "now, 0"),
    ("adjtimex", "adjtimex", "timex"),
    ("clock_adjtime", "clock_adjtime", "0, timex"),
    ("unshare_newtime", "unshare", "0x80"),
    ("clone_newtime", "clone", "0x80 | 17, 0, 0, 0, 0"),
]
_OFFSETS = (
    "(echo 'monotonic 86400 0' > /proc/self/timens_offsets) 2>/dev/null && echo offsets-written"
)


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_clocks_and_time_namespaces_are_refused(
    dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str
) -> None:
    drift_before = time.time() - time.monotonic()
    async with running(dev_env, data_dir, sandbox) as (bash, _):
        probe, offsets, alive = await bash.run(
            WORKER, [raw_calls(_CALLS, setup=_NOW), _OFFSETS, "echo alive"]
        )
    seen = dict(line.split("=", 1) for line in probe.stdout.split() if "=" in line)
    assert seen == {name: str(errno.EPERM) for name, _, _ in _CALLS}, (seen, probe.stderr)
    assert "offsets-written" not in offsets.stdout
    assert abs((time.time() - time.monotonic()) - drift_before) < 1.0
    assert alive.stdout == "alive\n"
