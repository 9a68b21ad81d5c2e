"""No path or planted symlink leads outside a store: '..' and NUL are refused, and a
link anywhere on the path is refused rather than followed, for activities and the
admin API alike."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal.memory import Provenance, StoreKind, StoreRef

from ._memory_support import call, memory_harness


async def test_traversal_and_links_are_refused(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str, tmp_path: Path
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="notes")])
    store = StoreRef(StoreKind.WORKFLOW, "notes")
    plugin.memory.write(store, "ok.md", b"fine", provenance=Provenance.admin("t"))
    root = data_dir / "memory" / "workflows" / "notes"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")
    os.symlink(outside, root / "linkdir")
    os.symlink(outside / "secret.txt", root / "linkfile.md")
    (root / "sub").mkdir()
    os.symlink("../../org", root / "sub" / "up")

    bad_paths = [
        "/mnt/memory/workflow/../org/x.md",
        "/mnt/memory/workflow/sub/../../workflow/ok.md",
        "/mnt/memory/workflow/linkdir/secret.txt",
        "/mnt/memory/workflow/linkfile.md",
        "/mnt/memory/workflow/sub/up/x.md",
        "/mnt/memory/workflow/a\x00b",
        "mnt/memory/workflow/ok.md",
    ]
    calls = []
    for path in bad_paths:
        calls.append(call("lw.memory.read", path=path))
        calls.append(call("lw.memory.write", path=path, content="pwned"))
        calls.append(call("lw.memory.append", path=path, content="pwned"))
    calls.append(call("lw.memory.list", path="/mnt/memory/workflow/linkdir"))
    calls.append(call("lw.memory.list", path="/mnt/memory/workflow"))
    async with memory_harness(dev_env, plugin, task_queue) as run:
        out = await run(f"run_notes@{task_queue}", *calls)

    for path, outcome in zip([p for p in bad_paths for _ in range(3)], out, strict=False):
        assert not outcome.ok, path
        assert outcome.error_type in ("LwPathRejected", "LwMemoryOutsideScope"), (path, outcome)
    assert out[-2].error_type == "LwPathRejected"
    listed = {e["path"]: e["kind"] for e in out[-1].result["entries"]}
    assert listed["/mnt/memory/workflow/linkdir"] == "link"
    assert "/mnt/memory/workflow/linkdir/secret.txt" not in listed
    assert (outside / "secret.txt").read_text() == "top secret"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert not (data_dir / "memory" / "org").exists()


def test_admin_api_refuses_the_same_paths(data_dir: Path, tmp_path: Path) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="notes")])
    store = StoreRef(StoreKind.WORKFLOW, "notes")
    admin = Provenance.admin("alice")
    plugin.memory.write(store, "a/b.md", b"x", provenance=admin)
    target = tmp_path / "elsewhere"
    target.mkdir()
    os.symlink(target, data_dir / "memory/workflows/notes/a/l")
    for rel in ["../x", "/etc/passwd", "a/l/x", "a/../../x", "a/.lw-tmp-1"]:
        with pytest.raises(ApplicationError) as err:
            plugin.memory.write(store, rel, b"x", provenance=admin)
        assert err.value.type == "LwPathRejected", rel
        assert err.value.non_retryable
    with pytest.raises(ApplicationError):
        plugin.memory.delete(store, "a/l/x", provenance=admin)
    assert list(target.iterdir()) == []
