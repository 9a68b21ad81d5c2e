"""Retention of kept versions: a policy per store (the last N of each file and those
younger than an age, never the current one), kept in the store's bookkeeping, applied
by the retention workflow and the CLI, each removal audited."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from lw_temporal import LittleWorkflowPlugin
from lw_temporal._cli import main
from lw_temporal.ids import DataLayout
from lw_temporal.memory import (
    RETENTION_WORKFLOW,
    GcReport,
    MemoryStores,
    Provenance,
    RetentionPolicy,
    StoreKind,
    StoreRef,
    VersionRetention,
)

from .conftest import plugin_client

STORE = StoreRef(StoreKind.WORKFLOW, "notes")
ADMIN = Provenance.admin("t")


def test_retention_policy_is_kept_applied_and_audited(data_dir: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    for i in range(5):
        stores.append(STORE, "log.md", b"%d\n" % i, provenance=ADMIN)
    stores.set_retention(STORE, VersionRetention(keep_last=2), provenance=Provenance.admin("ops"))
    assert stores.retention(STORE).keep_last == 2
    # young versions are kept while keep_days covers them
    stores.set_retention(
        STORE, VersionRetention(keep_last=2, keep_days=1), provenance=Provenance.admin("ops")
    )
    assert stores.prune(STORE).removed == 0
    stores.set_retention(STORE, VersionRetention(keep_last=2), provenance=Provenance.admin("ops"))
    [result] = stores.apply_retention(provenance=Provenance.admin("retention"))
    assert result.removed == 3 and result.freed_bytes > 0
    entries = stores.audit(STORE)
    assert [e.op for e in entries].count("retention") == 3
    prune = entries[-1]
    assert (prune.op, prune.path, prune.actor) == ("prune", "log.md", "retention")
    current = stores.read(STORE, "log.md").content_sha256
    assert [v.available for v in stores.versions(STORE, "log.md")] == [False] * 3 + [True] * 2
    assert stores.blob(STORE, current or "") == b"0\n1\n2\n3\n4\n"


async def test_the_retention_workflow_applies_each_store_policy(
    dev_env: WorkflowEnvironment,
    data_dir: Path,
    task_queue: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [])
    stores = plugin.memory
    for i in range(4):
        stores.append(STORE, "log.md", b"%d\n" % i, provenance=ADMIN)
    code = await asyncio.to_thread(
        main, ["memory", "retention", "--data-dir", str(data_dir), "workflow:notes",
               "--keep-last", "1", "--by", "ops"]
    )  # fmt: skip
    assert code == 0 and "keeps the last 1 versions" in capsys.readouterr().out
    client = plugin_client(dev_env, plugin)
    async with Worker(client, task_queue=task_queue):
        report = await client.execute_workflow(
            RETENTION_WORKFLOW, RetentionPolicy(), id=f"retention-{task_queue}",
            task_queue=task_queue, result_type=GcReport,
        )  # fmt: skip
    assert report.versions_pruned == 3
    assert [v.available for v in stores.versions(STORE, "log.md")] == [False] * 3 + [True]
    prune = stores.audit(STORE)[-1]
    assert prune.op == "prune" and prune.actor == f"workflow:retention-{task_queue}"
    code = await asyncio.to_thread(
        main, ["memory", "prune", "--data-dir", str(data_dir), "workflow:notes", "--by", "ops"]
    )
    out = capsys.readouterr().out
    assert code == 0 and "removed 0 kept versions" in out and "versions included" in out
