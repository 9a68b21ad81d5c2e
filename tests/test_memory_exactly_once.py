"""A mutation that committed but whose activity failed before reporting (a worker
dying after the write) is retried by Temporal and not applied twice: the retry finds
the idempotency ledger entry and returns the recorded result."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal.memory import StoreKind, StoreRef

from ._memory_support import call, memory_harness


class _CrashAfterCommit(RuntimeError):
    pass


async def test_retried_append_applies_once(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="notes")])
    attempts: list[tuple[str, int]] = []

    def crash_on_first_attempt(activity_type: str, attempt: int) -> None:
        attempts.append((activity_type, attempt))
        if attempt == 1:
            raise _CrashAfterCommit("worker lost after the commit")

    plugin.memory_activities.after_commit = crash_on_first_attempt
    path = "/mnt/memory/workflow/log.md"
    wid = f"run_notes@{task_queue}"
    async with memory_harness(dev_env, plugin, task_queue) as run:
        out = await run(
            wid,
            call("lw.memory.append", path=path, content="line one\n"),
            call("lw.memory.append", path=path, content="line two\n"),
            max_attempts=5,
        )

    assert all(o.ok for o in out), [o.message for o in out]
    assert attempts == [
        ("lw.memory.append", 1),
        ("lw.memory.append", 2),
        ("lw.memory.append", 1),
        ("lw.memory.append", 2),
    ]
    assert [o.result["replayed"] for o in out] == [True, True]
    content = (data_dir / "memory/workflows/notes/log.md").read_text()
    assert content == "line one\nline two\n"
    assert out[1].result["content_sha256"] is not None
    audit = plugin.memory.audit(StoreRef(StoreKind.WORKFLOW, "notes"))
    assert [(e.op, e.attempt, e.workflow_id) for e in audit] == [
        ("append", 1, wid),
        ("append", 1, wid),
    ]
    assert audit[0].activity_id != audit[1].activity_id
