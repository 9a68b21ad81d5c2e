"""``forget`` given a sub-run's ID (or a malformed one) says so, naming the tree to
forget instead, before it reaches for a server: an operator who typed a step's ID was
told the server could not be reached, and only after starting one that the ID was the
wrong one. Nothing is erased or written either way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

UNREACHABLE = "127.0.0.1:9"  # the discard port: nothing answers


def _forget(data_dir: Path, workflow_id: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lw_temporal._cli", "forget", workflow_id,
         "--data-dir", str(data_dir), "--by", "ops", "--why", "test",
         "--address", UNREACHABLE],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("workflow_id", "named"),
    [
        ("pipeline_abc/sub-runs/run_cr@1", "forget pipeline_abc"),
        ("pipeline_abc/sub-runs/run_cr@1/steps/step_2", "forget pipeline_abc"),
        ("pipeline_abc/../x", "WORKFLOW_ID"),
    ],
)
def test_a_sub_run_or_malformed_id_is_refused_before_connecting(
    data_dir: Path, workflow_id: str, named: str
) -> None:
    done = _forget(data_dir, workflow_id)
    assert done.returncode == 1, done
    assert named in done.stderr, done.stderr
    assert "reach" not in done.stderr, done.stderr
    assert not any(data_dir.iterdir())  # nothing written
