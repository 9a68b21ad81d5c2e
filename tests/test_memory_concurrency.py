"""Many writers in several processes lose nothing and tear nothing: every append is
present exactly once, whole, and in the audit log once; concurrent activities on one
worker behave the same."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from collections import Counter
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef

from ._memory_support import call, memory_harness

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


def _activity_worker(
    target: str, task_queue: str, data_dir: str, pids: str, ready: object, stop: object
) -> None:
    """A separate worker process running only the memory activities."""
    import asyncio

    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.worker import Worker

    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="notes")])

    def note_pid(_activity_type: str, _attempt: int) -> None:
        with open(pids, "a") as f:
            f.write(f"{os.getpid()}\n")

    plugin.memory_activities.after_commit = note_pid

    async def main() -> None:
        client = await Client.connect(target, data_converter=pydantic_data_converter)
        async with Worker(
            client,
            task_queue=task_queue,
            activities=list(plugin.memory_activities.callables),
            max_concurrent_activities=8,
        ):
            ready.set()  # type: ignore[attr-defined]
            await asyncio.to_thread(stop.wait)  # type: ignore[attr-defined]

    asyncio.run(main())


async def test_appends_from_activities_in_two_worker_processes(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str, tmp_path: Path
) -> None:
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    pids = tmp_path / "pids"
    target = dev_env.client.service_client.config.target_host
    readies = [ctx.Event() for _ in range(2)]
    procs = [
        ctx.Process(
            target=_activity_worker,
            args=(target, task_queue, str(data_dir), str(pids), ready, stop),
        )
        for ready in readies
    ]
    for p in procs:
        p.start()
    try:
        for ready in readies:
            assert ready.wait(timeout=120)
        plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="notes")])
        path = "/mnt/memory/workflow/shared.md"
        async with memory_harness(dev_env, plugin, task_queue, with_activities=False) as run:
            outs = await asyncio.gather(
                *(
                    run(
                        f"run_notes@{task_queue}-{w}",
                        *[
                            call("lw.memory.append", path=path, content=f"w{w} e{i}\n")
                            for i in range(20)
                        ],
                        parallel=True,
                    )
                    for w in range(3)
                )
            )
    finally:
        stop.set()
        for p in procs:
            p.join(timeout=60)
    assert all(o.ok for out in outs for o in out)
    lines = (data_dir / "memory/workflows/notes/shared.md").read_text().splitlines()
    assert sorted(lines) == sorted(f"w{w} e{i}" for w in range(3) for i in range(20))
    worked = Counter(pids.read_text().split())
    assert len(worked) == 2 and sum(worked.values()) == 60, worked
    audit = MemoryStores(DataLayout.at(data_dir)).audit(StoreRef(StoreKind.WORKFLOW, "notes"))
    assert len(audit) == 60
