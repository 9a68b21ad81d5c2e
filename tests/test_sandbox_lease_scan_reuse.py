"""New agents given numbers whose leases ended long ago share one look through
``/proc`` for processes left of those numbers, instead of one each: nothing can take a
number nobody leases but a child of a process that has it already, which that look saw.
A number the look found in use is looked for afresh, and so is one whose last lease's
end is unknown (its host claim names a table that is gone)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lw_temporal._sandbox._lease_folders import has_processes
from lw_temporal._sandbox._leases import IdentityPool, PoolExhausted

from ._lease_trace_support import needs_strace, traced

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to take other uids")

_AGENTS = 8

_NEW_AGENTS = """
import os, sys, time
from pathlib import Path
from lw_temporal._sandbox._leases import IdentityPool
state, claims, first, folders = sys.argv[1:5]
first = int(first)
pool = IdentityPool(Path(state), range(first, first + 17), grace=0, host_claims=Path(claims))
pool.check()
os.write(2, b"=== grant\\n")
numbers = {pool.lease(f"run:new{n}", Path(folders) / f"new{n}", "run", time.time() + 600)
           for n in range(8)}
os.write(2, b"=== done\\n")
print(len(numbers))
"""

_HOLD = (
    "import os, sys, time\n"
    "os.setresuid(int(sys.argv[1]), int(sys.argv[1]), int(sys.argv[1]))\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


def _first(base: int) -> int:
    return base + (os.getpid() % 4096) * 32


def _holding(uid: int) -> subprocess.Popen[str]:
    """A process that has ``uid`` (as a leftover of its agent would)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(uid)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


@needs_strace
def test_new_agents_on_long_free_numbers_look_through_proc_once(tmp_path: Path) -> None:
    first = _first(0x7C200000)
    state, claims = tmp_path / "state", tmp_path / "claims"
    # Every agent number of the range (8 of 17 ids) was leased and has been free long since.
    old = IdentityPool(state, range(first, first + 17), grace=0, host_claims=claims)
    for n in range(_AGENTS):
        (tmp_path / f"old{n}").mkdir()
        old.lease(f"run:old{n}", tmp_path / f"old{n}", "run", time.time() - 600)
    for n in range(_AGENTS):
        (tmp_path / f"new{n}").mkdir()
    out, calls = traced(tmp_path, _NEW_AGENTS, str(state), str(claims), str(first), str(tmp_path))
    assert int(out) == _AGENTS  # each new agent a number of its own
    looks = [c for c in calls if "openat(" in c and '"/proc"' in c and "O_DIRECTORY" in c]
    assert len(looks) == 1, f"{len(looks)} looks through /proc for {_AGENTS} new agents"


@root_only
def test_a_number_found_in_use_is_looked_for_afresh(tmp_path: Path) -> None:
    first = _first(0x7C100000)
    ids, claims = range(first, first + 3), tmp_path / "claims"  # a single agent number
    pool = IdentityPool(tmp_path / "state", ids, grace=0, host_claims=claims)
    (tmp_path / "k0").mkdir()
    number = pool.lease("run:k0", tmp_path / "k0", "run", time.time() - 600)
    left = _holding(number)
    try:
        assert has_processes(number)  # the last look saw it
        with pytest.raises(PoolExhausted):  # a process of the number is left
            pool.lease("run:k1", tmp_path / "k1", "run", time.time())
    finally:
        left.kill()
        left.wait()
    # The last look saw it; it is gone now, and the number is free again at once.
    assert pool.lease("run:k1", tmp_path / "k1", "run", time.time()) == number


@root_only
def test_a_number_whose_last_table_is_gone_is_looked_for_afresh(tmp_path: Path) -> None:
    first = _first(0x7C000000)
    ids, claims = range(first, first + 3), tmp_path / "claims"
    gone = IdentityPool(tmp_path / "gone", ids, grace=0, host_claims=claims)
    (tmp_path / "g").mkdir()
    number = gone.lease("run:g", tmp_path / "g", "run", time.time() - 600)
    shutil.rmtree(tmp_path / "gone")  # its data dir removed: when its lease ended is unknown
    assert not has_processes(number)  # a look that finds none, a moment ago
    left = _holding(number)
    try:
        pool = IdentityPool(tmp_path / "state", ids, grace=0, host_claims=claims)
        with pytest.raises(PoolExhausted):
            pool.lease("run:k1", tmp_path / "k1", "run", time.time())
    finally:
        left.kill()
        left.wait()
