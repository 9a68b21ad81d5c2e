"""A store's number is its root's group, which every agent mounting the store holds as
a supplementary group: it goes to another store only when no process of the host
holds it as a group either (real, effective, saved, filesystem gid, or supplementary),
so a process an agent left behind cannot enter the next store given that number. Real
leases, real chowns, a real leftover process on the host."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lw_temporal._sandbox import _lease_folders
from lw_temporal._sandbox._idrange import split_ids
from lw_temporal._sandbox._lease_folders import has_processes
from lw_temporal._sandbox._leases import IdentityPool, PoolExhausted

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a non-root worker leases nothing")

NUMBER = 0x6FFF_F1F1  # inside no range a test leases from
AGENT = 0x6FFF_F1F2

LEFTOVER = (
    "import os, sys\n"
    "uid, gid, groups, fs = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])\n"
    "os.setgroups([int(g) for g in groups.split(',') if g])\n"
    "os.setresgid(gid, gid, gid)\n"
    "if fs >= 0:\n"
    "    import ctypes; ctypes.CDLL(None).setfsgid(fs)\n"
    "os.setresuid(uid, uid, uid)\n"
    "print('ready', flush=True)\n"
    "for line in sys.stdin:\n"
    "    try:\n"
    "        print('listed', sorted(os.listdir(line.strip())), flush=True)\n"
    "    except OSError as err:\n"
    "        print('refused', err.errno, flush=True)\n"
)


def _leftover(
    uid: int, gid: int, groups: tuple[int, ...], fsgid: int = -1
) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            LEFTOVER,
            str(uid),
            str(gid),
            ",".join(map(str, groups)),
            str(fsgid),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.wait()


@pytest.mark.parametrize(
    ("gid", "groups", "fsgid"),
    [(AGENT, (NUMBER,), -1), (NUMBER, (), -1), (AGENT, (), NUMBER)],
    ids=["supplementary", "gid", "fsgid"],
)
def test_a_process_holding_the_number_as_a_group_is_found(
    gid: int, groups: tuple[int, ...], fsgid: int
) -> None:
    assert not has_processes(NUMBER)
    proc = _leftover(AGENT, gid, groups, fsgid)
    try:
        assert has_processes(NUMBER)
    finally:
        _stop(proc)
    deadline = time.monotonic() + 5
    while has_processes(NUMBER) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not has_processes(NUMBER)


def test_a_store_number_a_leftover_process_holds_goes_to_no_other_store(tmp_path: Path) -> None:
    first = 0x7D000000 + (os.getpid() % 4096) * 16
    ids = range(first, first + 3)  # the shared group, one agent's number, one store's
    (agent,), (number,) = split_ids(ids)
    memory = tmp_path / "memory-root"
    old, new = memory / "memory" / "old", memory / "memory" / "new"
    for store in (old, new):
        store.mkdir(parents=True)
        (store / "note.md").write_text("private\n")
        store.chmod(0o700)  # root's until a lease gives it a group
    pool = IdentityPool(tmp_path / ".lw", ids, grace=0.0, host_claims=tmp_path / "claims")
    assert pool.lease("store:old", old, "store", time.time() - 3600) == number  # long ended
    # an agent's process that mounted the old store, left behind (its worker died)
    proc = _leftover(agent, agent, (ids[0], number))
    # In a deployment the leftover was started while the old store's lease was live, so
    # no look through /proc begun after that lease ended can have missed it; here it is
    # started after the end, so a look an earlier test made is forgotten.
    _lease_folders._last = None
    try:
        with pytest.raises(PoolExhausted):
            pool.lease("store:new", new, "store", time.time() + 60)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(f"{new}\n")
        proc.stdin.flush()
        assert proc.stdout.readline().startswith("refused"), "the leftover entered the new store"
    finally:
        _stop(proc)
    assert pool.lease("store:new", new, "store", time.time() + 60) == number  # once it is gone
    assert (new.stat().st_uid, new.stat().st_gid) == (0, number)
