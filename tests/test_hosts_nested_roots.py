"""A runs root and a memory root that overlap are refused where the worker is made,
saying which folder of which root the other sits in.

A runs root inside the memory root's ``memory/`` (say ``memory/org``) would put every
run's scratch into a store: other runs' files in every agent's view of it, and a
command's scratch writes in memory past every memory rule. One inside ``.lw/`` would
sit among the stores' journals and keys. A memory root inside the runs root's
``runs/`` or ``.lw/`` would be in reach of scratch retention and the sandbox's
cleanup. Roots side by side, or a memory root elsewhere under the runs root, stay
fine, and so does a worker the CLI starts with them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lw_temporal import LittleWorkflowPlugin
from lw_temporal.options import DeploymentOptions
from workflows.pipeline import DEFINITIONS


def _plugin(memory: Path, runs: Path) -> LittleWorkflowPlugin:
    return LittleWorkflowPlugin(
        definitions=DEFINITIONS,
        deployment=DeploymentOptions(memory_root=memory, runs_root=runs),
    )


@pytest.mark.parametrize(
    ("memory", "runs", "inside"),
    [
        ("shared", "shared/memory/org", "memory root's"),
        ("shared", "shared/memory", "memory root's"),
        ("shared", "shared/.lw/local", "memory root's"),
        ("local/runs/shared", "local", "runs root's"),
        ("local/.lw", "local", "runs root's"),
    ],
)
def test_overlapping_roots_are_refused(tmp_path: Path, memory: str, runs: str, inside: str) -> None:
    with pytest.raises(ValueError, match=f"inside the {inside}") as refused:
        _plugin(tmp_path / memory, tmp_path / runs)
    assert "a folder of its own" in str(refused.value)
    assert not (tmp_path / runs / "runs").exists()


def test_roots_apart_or_merely_nested_are_fine(tmp_path: Path) -> None:
    cases = (("shared", "local"), ("local/shared", "local"), ("m", "m/hosts/a"))
    for n, (memory, runs) in enumerate(cases):
        plugin = _plugin(tmp_path / str(n) / memory, tmp_path / str(n) / runs)
        plugin.config.topology.check_start()


def test_the_worker_command_says_why_it_does_not_start(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "lw_temporal._cli", "worker", "--no-model"),
            *("--definitions", "workflows.pipeline:DEFINITIONS", "--create"),
            *("--memory-root", str(tmp_path), "--runs-root", str(tmp_path / "memory" / "org")),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert "inside the memory root's" in done.stderr, done.stderr
