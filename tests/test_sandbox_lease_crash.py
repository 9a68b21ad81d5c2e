"""A worker killed at any step of granting a number leaves a table that never lets two
live agents share the number, never keeps it from others past its lease, and never
leaves an earlier agent's folder to the next holder.

Real processes: a worker process leases a new agent a number whose last lease (another
agent's, in the same table or in another table of the host) has ended and
``os._exit``s at one step of the grant; a fresh worker (this process) then leases from
the same table, as a restarted worker would: the agent's retry, another agent, another
table of the host. The range has a single agent number, so every lease wants that one."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lw_temporal._sandbox._leases import IdentityPool, PoolExhausted

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a non-root worker leases nothing")

#: The steps a grant may die after: the record written and synced, the old folder
#: given up, the record renamed in, the host claim written, the rename synced, the
#: folder given to the number; with where the number's last lease was (the host's
#: claim already names the table when it was the same table: nothing to write).
CASES = [
    (step, where)
    for step in ("prepared", "given-up", "renamed", "claimed", "synced", "taken")
    for where in ("same table", "other table")
    if (step, where) != ("claimed", "same table")
]

_WORKER = """
import os, sys, time
from pathlib import Path
from lw_temporal._sandbox import _leases
state, claims, first, step, until, folder = sys.argv[1:7]

def dies_after(fn, when=lambda *a: True):
    def wrapped(*args, **kwargs):
        result = fn(*args, **kwargs)
        if when(*args):
            os._exit(97)
        return result
    return wrapped

if step == "prepared":
    _leases.prepare = dies_after(_leases.prepare)
elif step == "given-up":
    _leases._Record.give_up = dies_after(_leases._Record.give_up)
elif step == "renamed":
    os.replace = dies_after(os.replace, lambda src, dst: Path(dst).parent.name == "leases")
elif step == "claimed":
    _leases.LeaseTable._claim_on_host = dies_after(_leases.LeaseTable._claim_on_host)
elif step == "synced":
    _leases.sync_folder = dies_after(_leases.sync_folder)
elif step == "taken":
    _leases.take = dies_after(_leases.take)
first = int(first)
pool = _leases.IdentityPool(Path(state), range(first, first + 3), grace=0, host_claims=Path(claims))
pool.lease("run:k1", Path(folder), "run", float(until))
os._exit(0)
"""


def _owners(folder: Path) -> set[int]:
    found = {folder.lstat().st_uid}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            found.add((Path(dirpath) / name).lstat().st_uid)
    return found


def _crash(
    tmp_path: Path, step: str, where: str, until: float
) -> tuple[IdentityPool, int, Path, Path]:
    """Agent k0 held the number (``where``) and its lease ended; a worker dies at
    ``step`` while leasing it to agent k1 until ``until``. Returns a restarted
    worker's pool, the number, k0's and k1's folders."""
    first = 0x7C800000 + (os.getpid() % 4096) * 16
    state, claims = tmp_path / "a", tmp_path / "claims"
    folders = []
    for name in ("k0", "k1"):
        folder = tmp_path / name
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / "notes.txt").write_text(f"agent {name}'s\n")
        folders.append(folder)
    old_state = state if where == "same table" else tmp_path / "c"
    old = IdentityPool(old_state, range(first, first + 3), grace=0, host_claims=claims)
    number = old.lease("run:k0", folders[0], "run", time.time() - 600)  # ended long ago
    assert _owners(folders[0]) == {number}
    args = [str(state), str(claims), str(first), step, str(until), str(folders[1])]
    worker = subprocess.run(
        [sys.executable, "-c", _WORKER, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert worker.returncode == 97, worker.stderr  # it died where it was told to
    restarted = IdentityPool(state, range(first, first + 3), grace=0, host_claims=claims)
    return restarted, number, folders[0], folders[1]


@pytest.mark.parametrize(("step", "where"), CASES)
def test_a_grant_killed_midway_shares_no_number_with_a_live_agent(
    tmp_path: Path, step: str, where: str
) -> None:
    pool, number, k0, k1 = _crash(tmp_path, step, where, time.time() + 600)
    # The agent's retry gets the number, and all of its folder with it; k0's is not its.
    assert pool.lease("run:k1", k1, "run", time.time() + 600) == number
    assert _owners(k1) == {number}
    assert number not in _owners(k0)
    # While k1's lease lasts, neither another agent nor another table of the host gets it.
    k2 = tmp_path / "k2"
    k2.mkdir()
    with pytest.raises(PoolExhausted):
        pool.lease("run:k2", k2, "run", time.time())
    other = IdentityPool(tmp_path / "b", pool.ids, grace=0, host_claims=tmp_path / "claims")
    with pytest.raises(PoolExhausted):
        other.lease("run:x", tmp_path / "x", "run", time.time())


@pytest.mark.parametrize(("step", "where"), CASES)
def test_a_grant_killed_midway_holds_the_number_no_longer_than_its_lease(
    tmp_path: Path, step: str, where: str
) -> None:
    # The lease the dead worker was granting ended long ago (as if it died long ago).
    pool, number, k0, k1 = _crash(tmp_path, step, where, time.time() - 600)
    k2 = tmp_path / "k2"
    k2.mkdir()
    (k2 / "mine.txt").write_text("agent k2's\n")
    assert pool.lease("run:k2", k2, "run", time.time() + 600) == number
    assert _owners(k2) == {number}
    # Nothing of k0's or k1's folder is the number's now that k2 holds it.
    assert number not in _owners(k0) | _owners(k1)
