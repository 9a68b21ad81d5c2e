"""A write that would break the store's quota (total bytes, files, bytes per file) is
refused whole with a typed error saying which limit, and the store stays as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, MemoryQuota, WorkflowDefinition
from lw_temporal.memory import Provenance, StoreKind, StoreRef
from lw_temporal.options import MemoryOptions

from ._memory_support import call, memory_harness


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


async def test_quota_refusals_leave_the_store_unchanged(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    # The byte quota counts the store's records (audit, journal, ledger: about a KiB
    # per change) with its files, so the files here are sized well apart from them.
    quota = MemoryQuota(max_bytes=16_000, max_files=3, max_file_bytes=15_000)
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="small", quota=quota)])
    root = data_dir / "memory/workflows/small"
    async with memory_harness(dev_env, plugin, task_queue) as run:
        setup = await run(
            f"run_small@{task_queue}",
            call("lw.memory.write", path="/mnt/memory/workflow/a.md", content="a" * 50),
            call("lw.memory.write", path="/mnt/memory/workflow/b.md", content="b" * 40),
        )
        assert all(o.ok for o in setup)
        before = _snapshot(root)
        out = await run(
            f"run_small@{task_queue}-2",
            call("lw.memory.write", path="/mnt/memory/workflow/big.md", content="c" * 15_001),
            call("lw.memory.append", path="/mnt/memory/workflow/b.md", content="d" * 14_000),
        )
        after_refusals = _snapshot(root)
        audited = [e.path for e in plugin.memory.audit(StoreRef(StoreKind.WORKFLOW, "small"))]
        ok = await run(
            f"run_small@{task_queue}-3",
            call("lw.memory.write", path="/mnt/memory/workflow/c.md", content="e" * 10),
            call("lw.memory.write", path="/mnt/memory/workflow/d.md", content=""),
            call("lw.memory.write", path="/mnt/memory/workflow/a.md", content="shrunk"),
        )
    assert [o.error_type for o in out] == ["LwQuotaExceeded"] * 2
    assert "max_file_bytes" in (out[0].message or "")
    assert "max_bytes" in (out[1].message or "") and "audit log" in (out[1].message or "")
    assert after_refusals == before
    store = StoreRef(StoreKind.WORKFLOW, "small")
    assert audited == ["a.md", "b.md"]
    assert ok[0].ok, ok[0].message  # it fits, records and all
    assert ok[1].error_type == "LwQuotaExceeded" and "max_files" in (ok[1].message or "")
    assert ok[2].ok  # shrinking is always allowed
    assert plugin.memory.recount(store) == {"bytes": 6 + 40 + 10, "files": 3}


def test_org_and_pipeline_stores_use_the_plugin_quota(data_dir: Path) -> None:
    plugin = LittleWorkflowPlugin(
        data_dir,
        [WorkflowDefinition(id="x")],
        memory=MemoryOptions(store_quota=MemoryQuota(max_file_bytes=8)),
    )
    org = StoreRef(StoreKind.ORG, "org")
    with pytest.raises(ApplicationError) as err:
        plugin.memory.write(org, "p.md", b"123456789", provenance=Provenance.admin("t"))
    assert err.value.type == "LwQuotaExceeded" and err.value.non_retryable
    assert not (data_dir / "memory/org").exists()
    plugin.memory.write(org, "p.md", b"12345678", provenance=Provenance.admin("t"))
    big = StoreRef(StoreKind.WORKFLOW, "x")
    plugin.memory.write(big, "p.md", b"123456789", provenance=Provenance.admin("t"))
