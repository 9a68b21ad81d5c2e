"""A store whose spool cannot be used still takes every mutation.

The spool (``<state>/spool/``) is how a process hands its mutation to the one that
holds the store's lock. Something in the way of it (here a file where its folder
goes; a folder that cannot be listed or written does the same) made every mutation
of the store fail with a raw ``NotADirectoryError`` or ``FileExistsError``, in every
process, for as long as it stayed. Now the process that cannot use the spool commits
its own mutations once it holds the lock, as mutations that cannot be spooled always
did, and says once which spool and what to do."""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, _journal
from tests._spool_support import STORE, provenance, requester


def test_a_file_in_the_way_of_the_spool_blocks_no_mutation(
    data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    stores.append(STORE, "shared.md", b"start\n", provenance=provenance("start"))
    state = stores.state_dir(STORE)
    spool = state / "spool"
    if spool.exists():
        spool.rmdir()
    spool.write_text("not a folder\n")

    # another process, while this one holds the lock: it cannot spool, so it waits
    held = _journal.try_lock(state)
    assert held is not None
    ctx = multiprocessing.get_context("spawn")
    report = ctx.Queue()
    other = ctx.Process(target=requester, args=(str(data_dir), "other", report))
    other.start()
    try:
        time.sleep(1.0)  # it tries the spool, and waits for the lock
        assert other.is_alive() and report.empty(), report.get_nowait()
    finally:
        os.close(held)
    assert report.get(timeout=60) == ("other", ("append", False))
    other.join(timeout=60)
    assert other.exitcode == 0

    # this process: its mutation commits, and it is told why it did not use the spool
    with caplog.at_level(logging.WARNING, logger="lw_temporal.memory._commit"):
        fresh = MemoryStores(DataLayout.at(data_dir))
        assert fresh.append(STORE, "shared.md", b"mine\n", provenance=provenance("mine")).op == (
            "append"
        )
        fresh.append(STORE, "shared.md", b"again\n", provenance=provenance("again"))
    warned = [r.getMessage() for r in caplog.records if "spool" in r.getMessage()]
    assert len(warned) == 1, warned
    assert str(spool) in warned[0] and "remove what is in the way" in warned[0]

    assert fresh.read(STORE, "shared.md").content.splitlines() == [
        "start", "other", "mine", "again",
    ]  # fmt: skip
    audited = [str(e.workflow_id) for e in fresh.audit(STORE) if e.op == "append"]
    assert audited == [f"run_notes@{w}" for w in ("start", "other", "mine", "again")]
    assert spool.read_text() == "not a folder\n"  # left as it was
