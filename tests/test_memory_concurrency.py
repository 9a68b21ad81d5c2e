"""Many writers in several processes lose nothing and tear nothing: every append is
present exactly once, whole, and in the audit log once; concurrent activities on one
worker behave the same."""

from __future__ import annotations

import multiprocessing
from collections import Counter
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import (
    LittleWorkflowPlugin,
    MemoryStores,
    Provenance,
    StoreKind,
    StoreRef,
    WorkflowDefinition,
)
from lw_temporal._ids import DataLayout

from .memory_harness import call, memory_harness

STORE = StoreRef(StoreKind.PIPELINE, "ab" * 32)
PROCESSES = 4
APPENDS = 50


def _writer(data_dir: str, proc: int, start: object) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    start.wait()  # type: ignore[attr-defined]
    for i in range(APPENDS):
        line = f"proc={proc} i={i} " + "x" * (i * 37 % 300) + "\n"
        stores.append(STORE, "shared.log", line.encode(), provenance=Provenance.admin(f"p{proc}"))
        if i % 10 == 0:
            stores.write(
                STORE, f"own/p{proc}-{i}.md", f"{proc}:{i}".encode(),
                provenance=Provenance.admin(f"p{proc}"),
            )  # fmt: skip


def test_appends_from_four_processes_all_land_once(data_dir: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(str(data_dir), p, start)) for p in range(PROCESSES)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(timeout=300)
        assert p.exitcode == 0

    stores = MemoryStores(DataLayout.at(data_dir))
    text = stores.read(STORE, "shared.log").content
    lines = text.splitlines()
    assert len(lines) == PROCESSES * APPENDS
    counts = Counter(" ".join(line.split(" ")[:2]) for line in lines)
    assert set(counts.values()) == {1}
    for line in lines:
        proc, i = (int(part.split("=")[1]) for part in line.split(" ")[:2])
        assert line == f"proc={proc} i={i} " + "x" * (i * 37 % 300)
    # each process's own appends stay in its order
    for proc in range(PROCESSES):
        mine = [int(line.split(" ")[1][2:]) for line in lines if line.startswith(f"proc={proc} ")]
        assert mine == list(range(APPENDS))
    audit = stores.audit(STORE)
    appends = [e for e in audit if e.op == "append"]
    assert len(appends) == PROCESSES * APPENDS
    assert len({e.sha256_after for e in appends}) == len(appends)
    assert len([e for e in audit if e.op == "write"]) == PROCESSES * APPENDS // 10
    listing = stores.list_files(STORE, "own")
    assert len(listing.entries) == PROCESSES * APPENDS // 10
    assert stores.recount(STORE)["files"] == 1 + PROCESSES * APPENDS // 10


async def test_parallel_append_activities(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="notes")])
    path = "/mnt/memory/workflow/journal.md"
    async with memory_harness(dev_env, plugin, task_queue) as run:
        out = await run(
            f"run_notes@{task_queue}",
            *[call("lw.memory.append", path=path, content=f"entry {i}\n") for i in range(30)],
            parallel=True,
        )
    assert all(o.ok for o in out)
    lines = (data_dir / "memory/workflows/notes/journal.md").read_text().splitlines()
    assert sorted(lines) == sorted(f"entry {i}" for i in range(30))
    audit = plugin.memory.audit(StoreRef(StoreKind.WORKFLOW, "notes"))
    assert len({e.activity_id for e in audit}) == 30
