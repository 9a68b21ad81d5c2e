"""A store's own records (audit log, journal, ledger) count toward its byte quota: a
planner that makes and removes folders in its memory again and again (each change an
audit line, a journal record, a ledger entry) fills the quota with records, after
which only shrinking or deleting is accepted, so the records stop growing within a
bound, and the store can still be cleaned up. Through the real ``lw.bash`` activity
(bwrap: Landlock shows writable memory read-only); measured on the host."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, MemoryQuota, WorkflowDefinition
from lw_temporal.memory import Provenance, StoreKind, StoreRef
from tests._bash_support import bash_worker

QUOTA = MemoryQuota(max_bytes=192 * 1024, max_files=60)
PLANNER = "run_churn@1"
MEMORY = "/mnt/memory/workflow"
STORE = StoreRef(StoreKind.WORKFLOW, "churn")


def _records(data_dir: Path) -> int:
    """The store's bookkeeping bytes as the disk holds them."""
    state = data_dir / ".lw" / "stores"
    return sum(
        p.stat().st_size
        for p in state.rglob("*")
        if p.name in ("audit.jsonl", "journal.log", "ledger.log") and "churn" in str(p)
    )


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bwrap")
async def test_folder_churn_stops_within_the_quota(
    dev_env: WorkflowEnvironment, data_dir: Path
) -> None:
    plugin = LittleWorkflowPlugin(
        data_dir, [WorkflowDefinition(id="churn", quota=QUOTA)], sandbox="bwrap"
    )
    plugin.memory.write(STORE, "notes.md", b"keep me\n", provenance=Provenance.admin("seed"))
    sizes: list[int] = []
    refusals: list[str] = []
    async with bash_worker(dev_env, plugin) as bash:
        for _ in range(10):
            made, _ = await bash.run(PLANNER, [f"mkdir {MEMORY}/d{{1..50}}", f"rmdir {MEMORY}/d*"])
            refusals += made.memory_refused
            sizes.append(_records(data_dir))
        cleanup = await bash.one(PLANNER, f"rm {MEMORY}/notes.md")
    assert any("audit log, journal and ledger" in r for r in refusals), refusals
    assert sizes[-1] == sizes[-2] == sizes[-3], sizes  # nothing grows any more
    # At most the quota, plus a record for each change that took an entry away.
    assert sizes[-1] <= QUOTA.max_bytes + 64 * 2048, sizes
    assert [c.kind for c in cleanup.memory_changes] == ["delete"], cleanup
    assert not (data_dir / "memory/workflows/churn/notes.md").exists()
