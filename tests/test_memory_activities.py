"""The lw.memory.* activities read and change a planner's own workflow memory on a
real server: lazily created store, content_sha256 on every read, str_replace, list,
delete, and an audit line per mutation naming the workflow and activity."""

from __future__ import annotations

import hashlib
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal.memory import StoreKind, StoreRef

from ._memory_support import call, memory_harness


async def test_planner_crud_on_its_workflow_memory(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="notes")])
    wid = f"run_notes@{task_queue}"
    path = "/mnt/memory/workflow/lessons/first.md"
    store_root = data_dir / "memory" / "workflows" / "notes"
    async with memory_harness(dev_env, plugin, task_queue) as run:
        first = await run(
            wid,
            call("lw.memory.read", path=path),
            call("lw.memory.list", path="/mnt/memory/workflow"),
        )
        assert first[0].ok and first[0].result["exists"] is False
        assert first[1].ok and first[1].result["entries"] == []
        assert not store_root.exists(), "reading must not create the store"

        out = await run(
            wid,
            call("lw.memory.write", path=path, content="# Lessons\n- retry flaky APIs\n"),
            call("lw.memory.append", path=path, content="- cache the schema\n"),
            call("lw.memory.replace", path=path, old_str="flaky APIs", new_str="flaky calls"),
            call("lw.memory.read", path=path),
            call("lw.memory.list", path="/mnt/memory"),
            call("lw.memory.write", path="/mnt/memory/workflow/tmp/x.md", file_text="x"),
            call("lw.memory.delete", path="/mnt/memory/workflow/tmp", recursive=True),
            call("lw.memory.list", path="/mnt/memory/workflow", recursive=False),
        )
    assert all(o.ok for o in out), [o.message for o in out if not o.ok]
    expected = "# Lessons\n- retry flaky calls\n- cache the schema\n"
    read = out[3].result
    assert read["content"] == expected
    assert read["content_sha256"] == hashlib.sha256(expected.encode()).hexdigest()
    assert out[2].result["content_sha256"] == read["content_sha256"]
    assert (store_root / "lessons" / "first.md").read_text() == expected

    listed = {e["path"]: e["kind"] for e in out[4].result["entries"]}
    assert listed["/mnt/memory/workflow"] == "dir"
    assert listed["/mnt/memory/workflow/lessons/first.md"] == "file"
    assert listed["/mnt/memory/org"] == "dir"
    assert out[6].result["deleted"] == ["tmp/x.md"]
    assert not (store_root / "tmp").exists()
    assert [e["path"] for e in out[7].result["entries"]] == ["/mnt/memory/workflow/lessons"]

    audit = plugin.memory.audit(StoreRef(StoreKind.WORKFLOW, "notes"))
    assert [(e.op, e.path) for e in audit] == [
        ("write", "lessons/first.md"),
        ("append", "lessons/first.md"),
        ("replace", "lessons/first.md"),
        ("write", "tmp/x.md"),
        ("delete", "tmp/x.md"),
        ("rmdir", "tmp"),
    ]
    for entry in audit:
        assert entry.workflow_id == wid
        assert entry.role == "planner"
        assert entry.namespace == "default"
        assert entry.run_id and entry.activity_id and entry.attempt == 1
        assert entry.activity_type and entry.activity_type.startswith("lw.memory.")
    # each entry chains to the one before it on the same path
    assert audit[1].sha256_before == audit[0].sha256_after
    assert audit[2].sha256_after == read["content_sha256"]
    assert not any(p.name.startswith(".lw") for p in store_root.rglob("*"))


async def test_replace_needs_exactly_one_occurrence(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="notes")])
    path = "/mnt/memory/workflow/a.md"
    async with memory_harness(dev_env, plugin, task_queue) as run:
        out = await run(
            f"run_notes@{task_queue}",
            call("lw.memory.write", path=path, content="x x"),
            call("lw.memory.replace", path=path, old="x", new="y"),
            call("lw.memory.replace", path=path, old="z", new="y"),
            call("lw.memory.replace", path="/mnt/memory/workflow/none.md", old="x", new="y"),
            call("lw.memory.delete", path="/mnt/memory/workflow/none.md"),
        )
    assert out[0].ok
    assert out[1].error_type == "LwInvalidRequest" and "2 times" in (out[1].message or "")
    assert out[2].error_type == "LwInvalidRequest"
    assert out[3].error_type == "LwMemoryNotFound"
    assert out[4].error_type == "LwMemoryNotFound"
    assert (data_dir / "memory" / "workflows" / "notes" / "a.md").read_text() == "x x"


async def test_reads_are_bounded_and_paged(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="notes")])
    path = "/mnt/memory/workflow/long.md"
    body = "0123456789" * 10
    async with memory_harness(dev_env, plugin, task_queue) as run:
        out = await run(
            f"run_notes@{task_queue}",
            call("lw.memory.write", path=path, content=body),
            call("lw.memory.read", path=path, max_bytes=30),
            call("lw.memory.read", path=path, offset=90, max_bytes=30),
            call("lw.memory.read", path=path, max_bytes=64 * 1024 * 1024),
        )
    first, tail = out[1].result, out[2].result
    assert first["content"] == body[:30] and first["truncated"] and first["size"] == 100
    assert tail["content"] == body[90:] and not tail["truncated"]
    expected = hashlib.sha256(body.encode()).hexdigest()
    assert first["content_sha256"] == tail["content_sha256"] == expected
    assert not out[3].ok  # above the per-read cap: refused before reaching the store
