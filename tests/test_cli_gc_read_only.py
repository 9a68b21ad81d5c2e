"""``gc`` on a data dir it cannot write stops at once with one line naming the fix (it
printed a line per run folder it could not move, then exited 1); ``--dry-run`` still
reads it. No server is needed for the refusal."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ._live_support import CLI, ROOT


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "data"
    (folder / "runs" / "pipeline_a" / "scratch").mkdir(parents=True)
    if os.geteuid() != 0:
        pytest.skip("needs root to bind-mount a folder read-only")
    subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True)
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_gc_refuses_a_read_only_data_dir_in_one_line(read_only_dir: Path) -> None:
    done = subprocess.run(
        [CLI, "gc", "--data-dir", str(read_only_dir), "--retain", "1s", "--address", "localhost:1"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr == (
        f"lw-temporal gc: --data-dir {read_only_dir} is on a read-only file system: gc removes "
        "folders there; run it where the data dir is writable (as the workers' user), or with "
        "--dry-run\n"
    )
