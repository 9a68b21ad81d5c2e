"""A worker process that dies inside a commit leaves no half-made change: after the
journal (the commit point) the next lock holder rolls it forward, once, audit line
and idempotency record included; before it, nothing happened."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest

from lw_temporal import MemoryStores, Provenance, StoreKind, StoreRef
from lw_temporal._ids import DataLayout
from lw_temporal._memory import _stores

STORE = StoreRef(StoreKind.WORKFLOW, "notes")
PROV = Provenance(
    namespace="default",
    workflow_id="run_notes@1",
    workflow_type="lw.Planner",
    run_id="r1",
    activity_id="3",
    activity_type="lw.memory.append",
    attempt=1,
    role="planner",
)


def _die_in_commit(data_dir: str, where: str) -> None:
    """Append, and kill this process at ``where`` inside the commit."""
    original_roll = _stores.MemoryStores._roll_forward
    original_usage = _stores.MemoryStores._write_usage

    def roll(self: Any, *args: Any, **kwargs: Any) -> None:
        if where == "after-journal" and not kwargs.get("recovering"):
            os._exit(9)
        original_roll(self, *args, **kwargs)

    def usage(state: Path, counters: Any) -> None:
        if where == "after-audit":
            os._exit(9)
        original_usage(state, counters)

    _stores.MemoryStores._roll_forward = roll  # type: ignore[method-assign]
    _stores.MemoryStores._write_usage = staticmethod(usage)  # type: ignore[method-assign,assignment]
    MemoryStores(DataLayout.at(data_dir)).append(STORE, "log.md", b"second\n", provenance=PROV)


@pytest.mark.parametrize("where", ["after-journal", "after-audit"])
def test_crash_inside_commit_is_rolled_forward_once(data_dir: Path, where: str) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    stores.append(STORE, "log.md", b"first\n", provenance=Provenance.admin("seed"))
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=_die_in_commit, args=(str(data_dir), where))
    proc.start()
    proc.join(timeout=120)
    assert proc.exitcode == 9
    journal = list((stores.state_dir(STORE) / "journal").glob("*.json"))
    assert len(journal) == 1

    # the retried activity asks the ledger first: recovery completes the commit
    record = stores.recorded(STORE, PROV.model_copy(update={"attempt": 2}))
    assert record is not None and record.op == "append"
    assert stores.read(STORE, "log.md").content == "first\nsecond\n"
    appends = [e for e in stores.audit(STORE) if e.workflow_id == "run_notes@1"]
    assert len(appends) == 1 and appends[0].attempt == 1
    assert not list((stores.state_dir(STORE) / "journal").glob("*.json"))
    # and a retry through the API returns the recorded result without appending
    again = stores.append(STORE, "log.md", b"second\n", provenance=PROV)
    assert again.replayed
    assert stores.read(STORE, "log.md").content == "first\nsecond\n"
    assert stores.recount(STORE) == {"bytes": 13, "files": 1}


def test_crash_before_the_journal_leaves_nothing(data_dir: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    stores.write(STORE, "a.md", b"v1", provenance=Provenance.admin("seed"))
    state = stores.state_dir(STORE)
    (state / "journal").mkdir(exist_ok=True)
    (state / "journal" / "torn.json").write_bytes(b'{"op_id": "torn", "ops": [')
    stores.write(STORE, "b.md", b"v1", provenance=Provenance.admin("seed"))
    assert not (state / "journal" / "torn.json").exists()
    assert stores.read(STORE, "a.md").content == "v1"
    assert [e.path for e in stores.audit(STORE)] == ["a.md", "b.md"]
