"""Memory changes made with bash go through the same store: each file gets a version
and an audit line with the lw.bash activity's provenance, and a command whose changes
break the scan or the quota has all of them rolled back and reported; a bash activity
retried after its commit does not commit again."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, MemoryQuota, WorkflowDefinition
from lw_temporal._scope import Scope
from lw_temporal.memory import Provenance, StoreChange, StoreKind, StoreRef

from ._bash_support import bash_worker
from ._memory_support import call, memory_harness

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

STORE = StoreRef(StoreKind.WORKFLOW, "notes")
KEY = "AKIA" + "Q3EGRIXTWJ7LUMEN"


async def test_bash_changes_are_versioned_audited_and_rolled_back(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    definition = WorkflowDefinition(id="notes", quota=MemoryQuota(max_file_bytes=10_000))
    plugin = LittleWorkflowPlugin(data_dir, [definition])
    plugin.memory.write(STORE, "old/a.md", b"a", provenance=Provenance.admin("seed"))
    plugin.memory.write(STORE, "old/b.md", b"b", provenance=Provenance.admin("seed"))
    root = data_dir / "memory/workflows/notes"
    wid = f"run_notes@{task_queue}"
    async with bash_worker(dev_env, plugin, task_queue) as runner:
        results = await runner.run(
            wid,
            [
                "echo 'lesson one' >> /mnt/memory/workflow/lessons.md && rm -r "
                "/mnt/memory/workflow/old",
                f"echo 'fine' > /mnt/memory/workflow/ok.md; echo 'key {KEY}' > "
                "/mnt/memory/workflow/leak.md; echo more >> /mnt/memory/workflow/lessons.md",
                "head -c 20000 /dev/zero > /mnt/memory/workflow/big.bin",
            ],
        )
    first, leaky, big = results
    assert first.exit_code == 0, first.stderr
    assert not first.memory_refused
    assert (root / "lessons.md").read_text() == "lesson one\n"
    assert not (root / "old").exists()

    assert leaky.exit_code == 0
    refused = "\n".join(leaky.memory_refused)
    assert "leak.md" in refused and "aws-access-key-id" in refused
    assert "ok.md" in refused and "rolled back" in refused
    assert KEY not in refused
    assert not (root / "ok.md").exists() and not (root / "leak.md").exists()
    assert (root / "lessons.md").read_text() == "lesson one\n"

    assert any("max_file_bytes" in r for r in big.memory_refused)
    assert not (root / "big.bin").exists()

    bash_entries = [e for e in plugin.memory.audit(STORE) if e.actor != "seed"]
    assert sorted((e.op, e.path) for e in bash_entries) == [
        ("delete", "old/a.md"),
        ("delete", "old/b.md"),
        ("rmdir", "old"),  # the folder's removal is audited as its creation is
        ("write", "lessons.md"),
    ]
    for entry in bash_entries:
        assert entry.workflow_id == wid
        assert entry.activity_type == "lw.bash"
        assert entry.role == "planner" and entry.activity_id and entry.attempt == 1
    assert len({e.op_id for e in bash_entries}) == 1
    # the deleted files stay restorable from their kept versions
    deleted = next(e for e in bash_entries if e.path == "old/a.md")
    assert deleted.sha256_before is not None
    assert plugin.memory.blob(STORE, deleted.sha256_before) == b"a"


async def test_retried_bash_command_commits_once(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="notes")])
    commit = plugin.bash_activities.commit_staged
    attempts: list[int] = []

    def lost_after_commit(
        scope: Scope, store: StoreRef, changes: Sequence[StoreChange], *, since: int | None = None
    ) -> Any:
        outcome = commit(scope, store, changes, since=since)
        attempts.append(activity.info().attempt)
        if activity.info().attempt == 1:
            raise RuntimeError("worker lost after the commit")
        return outcome

    plugin.bash_activities.commit_staged = lost_after_commit
    wid = f"run_notes@{task_queue}"
    async with memory_harness(
        dev_env, plugin, task_queue, extra_activities=plugin.bash_activities.callables
    ) as run:
        out = await run(
            wid, call("lw.bash", command="echo once >> /mnt/memory/workflow/log.md"), max_attempts=3
        )
    assert out[0].ok, out[0].message
    assert attempts == [1, 2]
    assert (data_dir / "memory/workflows/notes/log.md").read_text() == "once\n"
    assert [c["path"] for c in out[0].result["memory_changes"]] == ["/mnt/memory/workflow/log.md"]
    entries = plugin.memory.audit(STORE)
    assert [(e.op, e.path, e.attempt, e.workflow_id) for e in entries] == [
        ("write", "log.md", 1, wid)
    ]
