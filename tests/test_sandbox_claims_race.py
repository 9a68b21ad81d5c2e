"""Workers that start together on one data dir each keep their claim: a peer's sweep
running at the same moment never takes a starting worker's lock, sweeps its folders
or unlinks its lock file.

Real processes: one sweeps the owners' folder as fast as it can while this process
makes claims one after another; every claim must succeed, and every lock file it made
must still be there, held, when the sweeping stops."""

from __future__ import annotations

import fcntl
import multiprocessing
import os
from pathlib import Path

from lw_temporal._sandbox import WorkerClaim
from lw_temporal._sandbox._leftovers import sweep

CLAIMS = 1000


def _sweep_until(state: str, ready: object, stop: object) -> None:
    while not stop.is_set():  # type: ignore[attr-defined]
        sweep(Path(state))
        ready.set()  # type: ignore[attr-defined]


def test_a_sweep_racing_worker_starts_takes_no_live_claim(tmp_path: Path) -> None:
    state = tmp_path / "local"
    (state / "sandbox" / "owners").mkdir(parents=True)
    ctx = multiprocessing.get_context("spawn")
    ready, stop = ctx.Event(), ctx.Event()
    sweeper = ctx.Process(target=_sweep_until, args=(str(state), ready, stop))
    sweeper.start()
    assert ready.wait(timeout=120), "the sweeper never swept"
    claims: list[WorkerClaim] = []
    try:
        for _ in range(CLAIMS):
            claims.append(WorkerClaim(state))  # raised EAGAIN when a sweep won the race
    finally:
        stop.set()
        sweeper.join(timeout=60)
    assert sweeper.exitcode == 0
    owners = state / "sandbox" / "owners"
    for claim in claims:
        lock = owners / f"{claim.owner}.lock"
        assert lock.exists(), f"a sweep unlinked the live claim {claim.owner}"
        fd = os.open(lock, os.O_RDWR)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pass  # held by its claim, as it must be
            else:
                raise AssertionError(f"the lock of live claim {claim.owner} was free")
        finally:
            os.close(fd)
    for claim in claims:
        claim.release()
