"""A run that reads a version a tainted run wrote is tainted. With quarantine left off
for its workflow store (``MemoryConfig(quarantine=())``), a tainted planner's write
lands at once, its audit line and version say ``tainted``; the next planner that reads
it (with the memory tool, or with any bash command while the file is in its view) is
tainted by it, and ``memory readers --tainted`` names who read it."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import MemoryConfig, WorkflowDefinition
from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, StoreKind, StoreRef

from ._hierarchy_support import lw_worker
from ._taint_support import NEXT, WF, cli, command_planner, planner_id, run_planner

OPEN = WorkflowDefinition(id="open", memory=MemoryConfig(quarantine=()))
STORE = StoreRef(StoreKind.WORKFLOW, "open")


async def test_reading_a_tainted_version_taints_the_reader(
    dev_env: WorkflowEnvironment,
    data_dir: Path,
    task_queue: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    writer, reader, runner = (planner_id(task_queue, "open", t) for t in ("w", "r", "b"))
    async with lw_worker(dev_env, data_dir, task_queue, [OPEN], command_planner("open")) as c:
        await run_planner(c, task_queue, "open", "w", f"echo injected >> {WF}/lessons.md",
                          untrusted=True)  # fmt: skip
        assert stores.read(STORE, "lessons.md").content == "injected\n"  # not held
        await run_planner(c, task_queue, "open", "r", f"memory_read {WF}/lessons.md{NEXT}"
                          f"echo derived >> {WF}/derived.md")  # fmt: skip
        await run_planner(c, task_queue, "open", "b", "echo hello")
    assert stores.quarantined() == []
    [entry] = stores.audit(STORE, path="lessons.md")
    assert entry.workflow_id == writer and entry.tainted and entry.actor is None
    [version] = stores.versions(STORE, "lessons.md")
    assert version.tainted
    [derived] = stores.audit(STORE, path="derived.md")
    assert derived.tainted  # the reader is tainted, so what it writes is too

    code, out, _ = await cli(capsys, "memory", "manifest", "--data-dir", str(data_dir), reader)
    assert f"read {WF}/lessons.md, written by tainted run {writer}" in out, out
    code, out, _ = await cli(capsys, "memory", "manifest", "--data-dir", str(data_dir), runner)
    assert f"ran a command whose view holds {WF}/lessons.md" in out, out

    code, out, err = await cli(capsys, "memory", "readers", "--data-dir", str(data_dir),
                               "workflow:open", "lessons.md", "--tainted")  # fmt: skip
    assert (code, err) == (0, "")
    named = [line.split()[0] for line in out.splitlines()]
    assert reader in named and runner in named, out
    code, out, _ = await cli(capsys, "memory", "versions", "--data-dir", str(data_dir),
                             "workflow:open", "lessons.md")  # fmt: skip
    assert "(tainted)" in out
