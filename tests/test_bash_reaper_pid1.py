"""A worker that is pid 1 of its own pid namespace (a container's entrypoint, compose
without ``init: true``), or runs under a pid 1 that never reaps orphans, keeps running
commands: bwrap's sandbox init, which outlives the outer bwrap by a moment, is reaped
by the worker (a child subreaper) instead of piling up as zombies of the agent's uid
until ``bwrap: Can't fork for pid 1``. Each run goes through the real ``lw.bash``
activity in a fresh process; the host checks that no command failed and no zombie is
left."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests._bash_support import SANDBOXES

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="a pid namespace of its own needs root and unshare(1)",
)

#: bwrap's 2,000 in a row (each orphaned sandbox init a zombie without the reaper: the
#: 513th command failed); Landlock's launcher reaps its own: a few show it holds too.
COUNTS = {"bwrap": 2000, "landlock": 100}

#: A pid 1 that only waits for its one child by pid and never reaps anything else,
#: as a naive init or a shell script entrypoint does.
NON_REAPING_INIT = "import subprocess, sys\nsys.exit(subprocess.Popen(sys.argv[1:]).wait())\n"


def _run(argv: list[str], timeout: float) -> dict[str, object]:
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=root,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return summary


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_worker_as_pid_1_runs_commands_forever(tmp_path: Path, sandbox: str) -> None:
    count = COUNTS[sandbox]
    summary = _run(
        [sys.executable, "-m", "tests._pid1_commands", str(tmp_path / "data"), str(count), sandbox],
        timeout=30 + count * 0.5,
    )
    assert summary["pid"] == 1
    assert summary["failures"] == 0, summary
    assert summary["commands"] == count
    assert summary["zombies"] == 0, summary


def test_worker_under_a_pid_1_that_never_reaps(tmp_path: Path) -> None:
    count = 520  # past the 512 zombies that stopped such a worker
    summary = _run(
        [
            sys.executable,
            "-c",
            NON_REAPING_INIT,
            sys.executable,
            "-m",
            "tests._pid1_commands",
            str(tmp_path / "data"),
            str(count),
            "bwrap",
        ],
        timeout=30 + count * 0.5,
    )
    assert summary["pid"] == 2  # the worker is pid 1's child, as under compose's init
    assert summary["failures"] == 0, summary
    assert summary["zombies"] == 0, summary
