"""Memory store operations against raw file writes, measured in the same run.

    python benchmarks/memory_ops.py [--ops 300] [--big-store 5000]

Prints, for appends and whole-file writes, throughput and p50/p95 latency of the
store (lock, versions, journal, audit, all fsynced) beside raw ``aiofiles`` writes
followed by fsync, and their ratio; then 200 appends from 4 processes (every one
checked present exactly once) against 4 processes doing raw O_APPEND + fsync; then the
cost of committing one staged (bash-made) change into an empty store and into one
holding thousands of files.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiofiles

from lw_temporal import MemoryStores, Provenance, StagedChange, StoreKind, StoreRef
from lw_temporal._ids import DataLayout

STORE = StoreRef(StoreKind.WORKFLOW, "bench")
ADMIN = Provenance.admin("bench")
LINE = b"- a lesson learned while benchmarking the memory store, about 100 bytes long....\n"
DOC = b"# note\n" + b"x" * 1017


async def _timed(n: int, op: Callable[[int], Awaitable[object]]) -> tuple[float, list[float]]:
    latencies: list[float] = []
    start = time.perf_counter()
    for i in range(n):
        t = time.perf_counter()
        await op(i)
        latencies.append(time.perf_counter() - t)
    return time.perf_counter() - start, latencies


def _row(name: str, n: int, total: float, lat: list[float]) -> tuple[float, float]:
    rate = n / total
    p50 = statistics.median(lat) * 1000
    p95 = sorted(lat)[int(len(lat) * 0.95) - 1] * 1000
    print(f"  {name:<34} {rate:9.0f} ops/s   p50 {p50:7.3f} ms   p95 {p95:7.3f} ms")
    return rate, p50


async def _fsync(f: object) -> None:
    await asyncio.to_thread(os.fsync, f.fileno())  # type: ignore[attr-defined]


async def single_process(base: Path, n: int) -> None:
    stores = MemoryStores(DataLayout.at(base / "data"))
    raw = base / "raw"
    raw.mkdir()

    async def raw_append(_i: int) -> None:
        async with aiofiles.open(raw / "log.md", "ab") as f:
            await f.write(LINE)
            await f.flush()
            await _fsync(f)

    async def raw_write(i: int) -> None:
        async with aiofiles.open(raw / f"doc{i}.md", "wb") as f:
            await f.write(DOC)
            await f.flush()
            await _fsync(f)

    async def store_append(_i: int) -> None:
        await asyncio.to_thread(stores.append, STORE, "log.md", LINE, provenance=ADMIN)

    async def store_write(i: int) -> None:
        await asyncio.to_thread(stores.write, STORE, f"docs/doc{i}.md", DOC, provenance=ADMIN)

    print(f"single process, {n} operations each")
    for label, baseline, ours in (
        ("append", raw_append, store_append),
        ("write 1 KiB file", raw_write, store_write),
    ):
        base_rate, base_p50 = _row(f"raw aiofiles {label} + fsync", n, *await _timed(n, baseline))
        rate, p50 = _row(f"MemoryStores.{label.split()[0]}", n, *await _timed(n, ours))
        print(f"  -> throughput ratio {rate / base_rate:.2f}x, p50 ratio {p50 / base_p50:.2f}x")
    lines = stores.read(STORE, "log.md").content.splitlines()
    assert len(lines) == n, "lost appends"


def _store_appender(data: str, proc: int, count: int, start: object) -> None:
    stores = MemoryStores(DataLayout.at(data))
    start.wait()  # type: ignore[attr-defined]
    for i in range(count):
        stores.append(STORE, "shared.md", f"p{proc} i{i}\n".encode(), provenance=ADMIN)


def _raw_appender(path: str, proc: int, count: int, start: object) -> None:
    start.wait()  # type: ignore[attr-defined]
    for i in range(count):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, f"p{proc} i{i}\n".encode())
        os.fsync(fd)
        os.close(fd)


def _processes(target: Callable[..., None], where: str, procs: int, count: int) -> float:
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(procs + 1)
    workers = [ctx.Process(target=target, args=(where, p, count, start)) for p in range(procs)]
    for w in workers:
        w.start()
    start.wait()  # every interpreter has started before the clock does
    began = time.perf_counter()
    for w in workers:
        w.join()
        assert w.exitcode == 0
    return time.perf_counter() - began


def _check_once(text: str, procs: int, count: int) -> None:
    counts = Counter(text.splitlines())
    expected = {f"p{p} i{i}" for p in range(procs) for i in range(count)}
    assert set(counts) == expected and set(counts.values()) == {1}, "lost or doubled appends"


def multi_process(base: Path, procs: int = 4, count: int = 50) -> None:
    total = procs * count
    print(f"\n{total} concurrent appends from {procs} processes")
    raw = base / "raw-shared.md"
    raw_time = _processes(_raw_appender, str(raw), procs, count)
    _check_once(raw.read_text(), procs, count)
    rate = total / raw_time
    print(f"  raw O_APPEND + fsync                {rate:9.0f} appends/s  (all present once)")
    data = str(base / "multi")
    store_time = _processes(_store_appender, data, procs, count)
    stores = MemoryStores(DataLayout.at(data))
    _check_once(stores.read(STORE, "shared.md").content, procs, count)
    audited = [e for e in stores.audit(STORE) if e.op == "append"]
    assert len(audited) == total
    print(
        f"  MemoryStores.append                 {total / store_time:9.0f} appends/s  "
        f"(all present once, {len(audited)} audit lines)"
    )
    print(f"  -> throughput ratio {raw_time / store_time:.2f}x")


def staged_cost(base: Path, big: int, n: int = 50) -> None:
    print(f"\ncommit one bash-made change (p50 of {n}): empty store vs {big} files")
    upper = base / "upper.md"
    upper.write_bytes(LINE)
    bash = Provenance(workflow_id="run_bench@1", activity_type="lw.bash", role="planner")
    results: dict[str, float] = {}
    for label, files in (("empty store", 0), (f"{big} files", big)):
        stores = MemoryStores(DataLayout.at(base / f"staged-{files}"))
        root = stores.root(STORE)
        for i in range(files):
            (root / f"d{i // 500}").mkdir(parents=True, exist_ok=True)
            (root / f"d{i // 500}" / f"f{i}.md").write_bytes(DOC)
        stores.recount(STORE)
        stores.commit_staged(STORE, [StagedChange("warm.md", "write", upper)], bash)
        lat = []
        for i in range(n):
            t = time.perf_counter()
            stores.commit_staged(STORE, [StagedChange(f"new{i}.md", "write", upper)], bash)
            lat.append(time.perf_counter() - t)
        results[label] = statistics.median(lat) * 1000
        print(f"  {label:<34} p50 {results[label]:7.3f} ms")
    empty, full = results.values()
    print(f"  -> ratio {full / empty:.2f}x (1.0 = independent of store size)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--ops", type=int, default=300)
    parser.add_argument("--big-store", type=int, default=5000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lw-bench-") as tmp:
        base = Path(tmp)
        asyncio.run(single_process(base, args.ops))
        multi_process(base)
        staged_cost(base, args.big_store)


if __name__ == "__main__":
    main()
