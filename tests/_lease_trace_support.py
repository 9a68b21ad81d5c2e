"""The system calls of one real grant of a lease, as ``strace`` sees them (every
descriptor shown with its path), for the tests of what a grant writes and when."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lw_temporal._sandbox._leases import IdentityPool

needs_strace = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("strace") is None,
    reason="needs root (a grant chowns) and strace",
)

_GRANT = """
import os, sys
from pathlib import Path
from lw_temporal._sandbox._leases import IdentityPool
state, claims, first, folder, until = sys.argv[1:6]
first = int(first)
pool = IdentityPool(Path(state), range(first, first + 3), grace=0, host_claims=Path(claims))
pool.check()
os.write(2, b"=== grant\\n")
print(pool.lease("run:k1", Path(folder), "run", float(until)))
os.write(2, b"=== done\\n")
"""


def traced_grant(tmp_path: Path) -> tuple[int, list[str]]:
    """Agent k0's lease of the table's one agent number ended; a worker process
    leases it to agent k1. Returns the number and the grant's system calls."""
    first = 0x7C400000 + (os.getpid() % 4096) * 16
    state, claims = tmp_path / "state", tmp_path / "claims"
    k0, k1 = tmp_path / "k0", tmp_path / "k1"
    k0.mkdir()
    k1.mkdir()
    pool = IdentityPool(state, range(first, first + 3), grace=0, host_claims=claims)
    pool.lease("run:k0", k0, "run", time.time() - 600)
    args = [str(state), str(claims), str(first), str(k1), str(time.time() + 600)]
    out, calls = traced(tmp_path, _GRANT, *args)
    return int(out), calls


def traced(tmp_path: Path, code: str, *args: str) -> tuple[str, list[str]]:
    """Run ``code`` in a worker process under ``strace``: its output, and the calls it
    made between its ``=== grant`` and ``=== done`` marks (written to stderr)."""
    log = tmp_path / "strace.log"
    strace = ["strace", "-f", "-y", "-qq", "-o", str(log), "-e", "trace=%file,%desc"]
    worker = subprocess.run(
        [*strace, sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert worker.returncode == 0, worker.stderr
    lines = log.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if "=== grant" in line)
    end = next(i for i, line in enumerate(lines) if "=== done" in line)
    return worker.stdout, lines[start:end]
