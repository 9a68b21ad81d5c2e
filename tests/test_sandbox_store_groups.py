"""A memory store's group is leased once per memory root: every worker that mounts
the root (any runs root, any host) gives the store root the same group, from a half of
the range no agent's uid comes from; a host that mounts two memory roots never gives
one number to stores of both; a worker with another range is refused. Real leases,
real chowns, on the host (the pinned and separate-disks tests run whole pipelines)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from lw_temporal._sandbox._idrange import split_ids
from lw_temporal._sandbox._leases import IdentityPool, LeaseRefused

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a non-root worker leases nothing")


def _ids(base: int) -> range:
    first = base + (os.getpid() % 4096) * 16
    return range(first, first + 9)  # the shared group, 4 agents' numbers, 4 stores'


def _store(memory: Path, name: str) -> Path:
    folder = memory / "memory" / "workflows" / name
    folder.mkdir(parents=True)
    return folder


def _pool(runs_root: Path, memory_root: Path, ids: range, claims: Path) -> IdentityPool:
    return IdentityPool(
        runs_root / ".lw", ids, shared_state=memory_root / ".lw", host_claims=claims
    )


def test_two_runs_roots_of_one_memory_root_give_a_store_one_group(tmp_path: Path) -> None:
    ids = _ids(0x7C000000)
    runs_numbers, store_numbers = split_ids(ids)
    claims = tmp_path / "claims"
    memory = tmp_path / "memory-root"
    store = _store(memory, "review")
    a = _pool(tmp_path / "runs-a", memory, ids, claims)
    b = _pool(tmp_path / "runs-b", memory, ids, claims)
    until = time.time() + 60
    groups = set()
    for _ in range(3):  # interleaved, as two workers' commands are
        for pool in (a, b):
            groups.add(pool.lease("store:workflows/review", store, "store", until))
            assert (store.stat().st_uid, store.stat().st_gid) == (0, *groups)
    assert len(groups) == 1 and groups <= set(store_numbers)
    # Agents of both runs roots get numbers of the other half: none is the store's group.
    agents = set()
    for n, pool in enumerate((a, b)):
        scratch = tmp_path / f"scratch-{n}"
        scratch.mkdir()
        agents.add(pool.lease(f"run:run_cr@{n}", scratch, "run", until))
    assert len(agents) == 2 and agents <= set(runs_numbers)


def test_a_host_with_two_memory_roots_gives_their_stores_different_groups(
    tmp_path: Path,
) -> None:
    ids = _ids(0x7B000000)
    claims = tmp_path / "claims"
    until = time.time() + 60
    numbers = []
    for name in ("one", "two"):
        memory = tmp_path / f"memory-{name}"
        pool = _pool(memory, memory, ids, claims)
        numbers.append(pool.lease("store:org", _store(memory, "org"), "store", until))
    assert numbers[0] != numbers[1]


def test_a_number_another_host_leased_is_refused_where_this_host_gave_it_away(
    tmp_path: Path,
) -> None:
    ids = _ids(0x7A000000)
    shared = tmp_path / "shared-memory"
    store = _store(shared, "review")
    until = time.time() + 60
    # Host a (its own claims) leases the shared store's group.
    on_a = _pool(tmp_path / "runs-a", shared, ids, tmp_path / "claims-a")
    number = on_a.lease("store:workflows/review", store, "store", until)
    # Host b has given every store number to stores of a memory root only it mounts.
    claims_b = tmp_path / "claims-b"
    local = tmp_path / "local-memory"
    only_b = _pool(local, local, ids, claims_b)
    theirs = {}
    for n in range(len(split_ids(ids)[1])):
        folder = _store(local, f"s{n}")
        theirs[only_b.lease(f"store:workflows/s{n}", folder, "store", until)] = folder
    on_b = _pool(tmp_path / "runs-b", shared, ids, claims_b)
    with pytest.raises(LeaseRefused, match="in use on this host"):
        on_b.lease("store:workflows/review", store, "store", until)
    assert theirs[number].stat().st_gid == number  # the other store kept its group
    assert store.stat().st_gid == number  # and the shared one host a's


def test_a_worker_with_another_range_is_refused_by_the_tables_it_shares(
    tmp_path: Path,
) -> None:
    ids = _ids(0x79000000)
    claims = tmp_path / "claims"
    memory = tmp_path / "memory-root"
    first = _pool(tmp_path / "runs-a", memory, ids, claims)
    assert first.check() is None
    other = _pool(tmp_path / "runs-b", memory, range(ids.start, ids.stop + 2), claims)
    problem = other.check()
    assert problem is not None and "same sandbox_ids" in problem
    with pytest.raises(LeaseRefused, match="same sandbox_ids"):
        other.lease("store:org", _store(memory, "org"), "store", time.time() + 60)
