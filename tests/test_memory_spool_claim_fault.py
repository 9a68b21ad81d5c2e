"""A claim of the spool's requests that fails partway loses nothing and strands no
one: the committer's own queued mutations still commit, the requests it renamed
before the failure are committed and answered in the same batch, and the request it
could not take stays queued, and its requester, once it holds the lock, takes it back
and commits it itself.

The fault is real: another process's request, and a directory where its claimed name
goes (the rename of that one request into its claim fails, as on a full or
read-only folder), while the request before it is claimed; the blocked request's requester is
stopped (SIGSTOP) until the claim is over, so that no one else leads meanwhile."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, _journal
from tests._spool_support import STORE, provenance, requester

REQUESTERS = 2


def _requests(spool: Path) -> list[str]:
    try:
        return sorted(n for n in os.listdir(spool) if n.endswith(".req"))
    except FileNotFoundError:
        return []


def _wait(condition: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_claim_failing_partway_loses_and_strands_nothing(data_dir: Path) -> None:
    procs: list[Any] = []
    try:
        _run(data_dir, procs)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()  # even a stopped one (the test failed while it was)


def _run(data_dir: Path, procs: list[Any]) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    stores.append(STORE, "shared.md", b"start\n", provenance=provenance("start", keyed=False))
    state = stores.state_dir(STORE)
    spool = state / "spool"
    held = _journal.try_lock(state)
    assert held is not None
    ctx = multiprocessing.get_context("spawn")
    report = ctx.Queue()
    whos = [f"req{n}" for n in range(REQUESTERS)]
    for n, who in enumerate(whos):  # one after the other: their requests sort in this order
        procs.append(ctx.Process(target=requester, args=(str(data_dir), who, report)))
        procs[-1].start()
        _wait(lambda n=n: len(_requests(spool)) == n + 1, f"{who} spooled no request")
    _first, blocked = _requests(spool)
    in_the_way = spool / (blocked.removesuffix(".req") + ".taken")
    in_the_way.mkdir()
    stopped = procs[1].pid
    assert stopped is not None
    os.kill(stopped, signal.SIGSTOP)  # its request's requester cannot lead meanwhile

    # two appends of this process queue behind the held lock (no idempotency key:
    # they are not spooled), so one leader takes both into its batch
    committer = stores._writer._committer(STORE)
    results: dict[str, Any] = {}

    def local(who: str) -> None:
        try:
            line = f"{who}\n".encode()
            result = stores.append(
                STORE, "shared.md", line, provenance=provenance(who, keyed=False)
            )
        except BaseException as err:
            results[who] = f"{type(err).__name__}: {err}"
        else:
            results[who] = result.op

    threads = [threading.Thread(target=local, args=(f"own{n}",), daemon=True) for n in range(2)]
    for t in threads:
        t.start()
    _wait(lambda: len(committer._queue) == 2, "the local appends did not queue")
    os.close(held)

    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), f"a local append was stranded: {results}"
    assert results == {"own0": "append", "own1": "append"}
    who, outcome = report.get(timeout=60)  # the request claimed before the failure
    assert (who, outcome) == (whos[0], ("append", False))
    assert blocked in _requests(spool)  # the one that could not be claimed is still queued

    # its requester, holding the lock next, takes it back from the spool and commits it
    os.kill(stopped, signal.SIGCONT)
    who, outcome = report.get(timeout=60)
    assert (who, outcome) == (whos[1], ("append", False))
    assert blocked not in _requests(spool)
    in_the_way.rmdir()
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    lines = stores.read(STORE, "shared.md").content.splitlines()
    assert sorted(lines) == sorted(["start", "own0", "own1", *whos])
    keys = [str(e.workflow_id) for e in stores.audit(STORE) if e.op == "append"]
    assert sorted(keys) == sorted(f"run_notes@{w}" for w in ["start", "own0", "own1", *whos])
    left = [n for n in os.listdir(spool) if not n.endswith(".spare")]
    assert left == [], left
