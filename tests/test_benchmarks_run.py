"""Every benchmark still runs, at its smallest sizes.

The README's figures come from ``benchmarks/``; a benchmark that stopped running
stopped backing its figure without anyone noticing (three did: the caller checks they
could not satisfy in an ``ActivityEnvironment``, and a dream that read none of the
benchmark's runs and was polled forever). Each one here runs as a user would run it,
with sizes that take seconds; its targets are not judged at these sizes, only that it
runs to its end. The long tree benchmarks (fanout, scale, hosts) are left to their own
runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SMALL = {
    "approval_matching.py": ["--sizes", "1024"],
    "bash_overhead.py": ["--rounds", "2", "--fresh", "1"],
    "callers.py": ["--rounds", "1"],
    "dreaming.py": ["--sizes", "3", "--batch-size", "3"],
    "egress.py": ["--rounds", "1", "--megabytes", "1"],
    "history.py": ["--turns", "5"],
    "memory_ops.py": ["--appends", "3", "--big-store", "20", "--rounds", "1"],
    "memory_search.py": ["--notes", "50", "--queries", "5", "--appends", "2"],
    "precheck_corpus.py": ["--rounds", "1"],
    "privacy_overhead.py": ["--rounds", "1"],
    "taint_overhead.py": ["--appends", "10", "--checks", "100"],
    "tracing_overhead.py": ["--rounds", "1"],
}


def test_every_benchmark_is_listed_here_or_left_to_its_own_runs() -> None:
    scripts = {p.name for p in (ROOT / "benchmarks").glob("[!_]*.py")}
    long = {"fanout.py", "scale.py", "hosts.py", "agent_tasks.py", "prompt_cache.py"}
    assert scripts - long == set(SMALL), "a benchmark is neither run here nor named long"


@pytest.mark.parametrize("script", sorted(SMALL))
def test_the_benchmark_runs_to_its_end(script: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *SMALL[script]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{script}: {done.stdout[-2000:]}\n{done.stderr[-4000:]}"


def test_a_scale_size_without_a_shape_is_refused_naming_the_sizes(tmp_path: Path) -> None:
    """``scale.py --sizes 250`` ended in a ``KeyError: 250`` traceback after it had
    started a server and a worker; it is refused at once, naming what it takes."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "scale.py"), "--sizes", "100,250"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "'100,250'" in done.stderr and "100 (10x10), 400 (20x20), 1000 (25x40)" in done.stderr
    assert "Traceback" not in done.stderr
