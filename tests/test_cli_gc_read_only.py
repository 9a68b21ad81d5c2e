"""``gc`` on a data dir it cannot write stops at once with one line naming the fix (it
printed a line per run folder it could not move, then exited 1). No server is needed
for the refusal."""

from __future__ import annotations

import subprocess
from pathlib import Path

from . import test_cli_worker_start_checks as start_checks
from ._live_support import CLI, ROOT

ROOT_ONLY = start_checks.ROOT_ONLY
read_only = start_checks.read_only  # the fixture: a folder on a read-only mount


@ROOT_ONLY
def test_gc_refuses_a_read_only_data_dir_in_one_line(read_only: Path) -> None:
    done = subprocess.run(
        [CLI, "gc", "--data-dir", str(read_only), "--retain", "1s", "--address", "localhost:1"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr == (
        f"lw-temporal gc: --data-dir {read_only} is on a read-only file system: gc removes "
        "folders there; run it where the data dir is writable (as the workers' user), or with "
        "--dry-run\n"
    )
