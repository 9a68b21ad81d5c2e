"""Memory store operations against raw file writes, measured in the same run.

    python benchmarks/memory_ops.py [--appends 40] [--big-store 5000] [--no-bash]

1. One-line appends to a 0 B, 1, 2 and 10 MiB file, through the ``lw.memory.append``
   activity and through ``echo ... >> file`` in ``lw.bash`` (both run in-process by
   ``ActivityEnvironment`` with a planner's activity info): p50 latency, data dir
   growth per append (apparent bytes, and allocated blocks, averaged over the appends:
   bookkeeping is appended to per-store logs, so a block is shared by many appends;
   the journal's share is given back at its next checkpoint), and the ratio of each
   size to the empty file (targets: <= 1.5x on 2 MiB, <= 4 KiB allocated).
2. 4 processes x 50 appends to one file through the ``lw.memory.append`` activity
   against 4 processes x 50 raw ``os.write`` + ``fsync`` on an ``O_APPEND`` file, both
   timed the same way: each process from a barrier it waits on after start-up to its
   last durable write (not to its exit); printed in all (first barrier to last write)
   and per process. Every line is checked present exactly once, with its audit line.
3. The cost of committing one staged (bash-made) change into an empty store and into
   one holding thousands of files.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import multiprocessing
import os
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from temporalio.testing import ActivityEnvironment

from lw_temporal import BashRequest, LittleWorkflowPlugin, MemoryQuota, WorkflowDefinition
from lw_temporal.memory import (
    MemoryAppendRequest,
    MemoryStores,
    Provenance,
    StoreChange,
    StoreKind,
    StoreRef,
)

STORE = StoreRef(StoreKind.WORKFLOW, "bench")
PLANNER = ("run_bench@1", "lw.Planner")
LINE = "- a lesson learned while benchmarking the memory store, one line.\n"
DOC = b"# note\n" + b"x" * 1017
SIZES = {"0 B": 0, "1 MiB": 1 << 20, "2 MiB": 2 << 20, "10 MiB": 10 << 20}
QUOTA = MemoryQuota(max_bytes=1 << 34, max_files=100_000, max_file_bytes=1 << 30)


def _plugin(data_dir: Path) -> LittleWorkflowPlugin:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="bench", quota=QUOTA)])
    # The activities run here without a workflow (ActivityEnvironment), so there is no
    # server to confirm their caller: the checks are off, and their cost is measured by
    # benchmarks/callers.py instead.
    plugin.config.callers.enabled = False
    return plugin


class _Activity:
    """Runs activities as a planner of ``run_bench@1``, a new activity id per call
    (each call is a new activity, not a retry of the last one)."""

    def __init__(self, tag: str) -> None:
        self.env = ActivityEnvironment()
        self.tag = tag
        self.calls = 0

    async def run(self, fn: Callable[..., Awaitable[Any]], request: object) -> Any:
        self.calls += 1
        self.env.info = dataclasses.replace(
            self.env.info,
            workflow_id=PLANNER[0],
            workflow_type=PLANNER[1],
            activity_id=f"{self.tag}-{self.calls}",
        )
        return await self.env.run(fn, request)


def _disk(root: Path) -> tuple[int, int]:
    """(apparent bytes, allocated bytes) of everything under ``root``."""
    apparent = allocated = 0
    for folder, dirs, files in os.walk(root):
        for name in files + dirs:
            try:
                info = os.lstat(os.path.join(folder, name))
            except FileNotFoundError:
                continue
            apparent += info.st_size
            allocated += info.st_blocks * 512
    return apparent, allocated


async def appends(base: Path, n: int, bash: bool) -> None:
    print(f"one-line appends ({len(LINE)} bytes), p50 of {n}, as a planner")
    ways = ["lw.memory.append"] + (["lw.bash >>"] if bash else [])
    results: dict[str, dict[str, tuple[float, float, float]]] = {w: {} for w in ways}
    for way in ways:
        for label, size in SIZES.items():
            data_dir = base / f"append-{way.split()[0]}-{size}"
            plugin = _plugin(data_dir)
            name = f"f{size}.md"
            if size:
                plugin.memory.write(STORE, name, b"y" * (size - 1) + b"\n",
                                    provenance=Provenance.admin("bench"))  # fmt: skip
            act = _Activity(way)
            path = f"/mnt/memory/workflow/{name}"
            if way == "lw.memory.append":
                request: object = MemoryAppendRequest(path=path, content=LINE)
                fn: Callable[..., Awaitable[Any]] = plugin.memory_activities.append
            else:
                request = BashRequest(command=f"echo '{LINE.strip()}' >> {path}")
                fn = plugin.bash_activities.bash
            await act.run(fn, request)  # warm up: caches, the sandbox probe, the index
            disk_before = _disk(data_dir)
            latencies = []
            for _ in range(n):
                t = time.perf_counter()
                result = await act.run(fn, request)
                latencies.append(time.perf_counter() - t)
                assert getattr(result, "exit_code", 0) == 0, result
            disk_after = _disk(data_dir)
            content = plugin.memory.read_bytes(STORE, name) or b""
            assert content.count(LINE.encode()) == n + 1, "lost or doubled appends"
            results[way][label] = (
                statistics.median(latencies) * 1000,
                (disk_after[0] - disk_before[0]) / n,
                (disk_after[1] - disk_before[1]) / n,
            )
    print(f"  (growth: data dir bytes after minus before, divided by {n})")
    for way, rows in results.items():
        print(f"  {way}")
        empty = rows["0 B"][0]
        for label, (p50, apparent, allocated) in rows.items():
            print(
                f"    {label:>6} file  p50 {p50:8.2f} ms  ({p50 / empty:4.2f}x of empty)  "
                f"growth/append {apparent / 1024:6.2f} KiB apparent, "
                f"{allocated / 1024:6.2f} KiB allocated"
            )


def _activity_appender(data: str, proc: int, count: int, start: Any, times: Any) -> None:
    plugin = _plugin(Path(data))
    act = _Activity(f"p{proc}")

    async def run() -> None:
        # Set up as the raw side opens its file: the run's first activity (its manifest,
        # the store's first lock in this process) happens before the clock starts.
        warm = MemoryAppendRequest(path=f"/mnt/memory/workflow/warm-{proc}.md", content="w\n")
        await act.run(plugin.memory_activities.append, warm)
        start.wait()
        began = time.perf_counter()
        for i in range(count):
            request = MemoryAppendRequest(path="/mnt/memory/workflow/shared.md",
                                          content=f"p{proc} i{i}\n")  # fmt: skip
            await act.run(plugin.memory_activities.append, request)
        times.put((began, time.perf_counter()))

    asyncio.run(run())


def _raw_appender(path: str, proc: int, count: int, start: Any, times: Any) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    start.wait()
    began = time.perf_counter()
    for i in range(count):
        os.write(fd, f"p{proc} i{i}\n".encode())
        os.fsync(fd)
    times.put((began, time.perf_counter()))
    os.close(fd)


Timing = list[tuple[float, float]]  # per process: (barrier passed, last durable write)


def _processes(target: Callable[..., None], where: str, procs: int, count: int) -> Timing:
    """Each process's time from the barrier to its last durable write (both sides the
    same way: start-up before the barrier and interpreter exit after are not counted;
    ``perf_counter`` is the system-wide monotonic clock on Linux)."""
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(procs)
    times = ctx.Queue()
    workers = [
        ctx.Process(target=target, args=(where, p, count, start, times)) for p in range(procs)
    ]
    for w in workers:
        w.start()
    found = [times.get(timeout=600) for _ in workers]
    for w in workers:
        w.join()
        assert w.exitcode == 0
    return found


def _rates(timing: Timing, count: int) -> tuple[float, list[float]]:
    """Appends per second over the whole (first barrier to last write) and per process."""
    whole = len(timing) * count / (max(e for _, e in timing) - min(b for b, _ in timing))
    return whole, [count / (e - b) for b, e in timing]


def _check_once(text: str, procs: int, count: int) -> None:
    counts = Counter(text.splitlines())
    expected = {f"p{p} i{i}" for p in range(procs) for i in range(count)}
    assert set(counts) == expected and set(counts.values()) == {1}, "lost or doubled appends"


def multi_process(base: Path, procs: int = 4, count: int = 50, rounds: int = 3) -> None:
    total = procs * count
    print(
        f"\n{total} concurrent appends from {procs} processes, each timed from the barrier to "
        f"its last durable write ({rounds} rounds, raw and store alternating)"
    )
    raw_rates: list[tuple[float, list[float]]] = []
    store_rates: list[tuple[float, list[float]]] = []
    for r in range(rounds):
        raw = base / f"raw-shared-{r}.md"
        raw_rates.append(_rates(_processes(_raw_appender, str(raw), procs, count), count))
        _check_once(raw.read_text(), procs, count)
        data = base / f"multi-{r}"
        _plugin(data)  # the data dir exists before the processes start
        timing = _processes(_activity_appender, str(data), procs, count)
        store_rates.append(_rates(timing, count))
        stores = MemoryStores(_plugin(data).config.layout)
        _check_once(stores.read_bytes(STORE, "shared.md").decode(), procs, count)  # type: ignore[union-attr]
        audited = [e for e in stores.audit(STORE, path="shared.md") if e.op in ("append", "write")]
        assert len(audited) == total, "an append without its audit line"
        assert len({(e.activity_id, e.attempt) for e in audited}) == total
    for label, rates in (("raw O_APPEND + fsync", raw_rates), ("lw.memory.append", store_rates)):
        for whole, each in rates:
            shown = " ".join(f"{x:6.0f}" for x in each)
            print(f"  {label:<22} {whole:7.0f} appends/s in all; per process {shown}")
    ratios = [s[0] / r[0] for r, s in zip(raw_rates, store_rates, strict=True)]
    per_process = [
        statistics.median(s[1]) / statistics.median(r[1])
        for r, s in zip(raw_rates, store_rates, strict=True)
    ]
    print(
        f"  -> throughput ratio per round {' '.join(f'{x:.2f}' for x in ratios)}, median "
        f"{statistics.median(ratios):.2f}x (target >= 0.20); per process (median process) "
        f"{statistics.median(per_process):.2f}x; every line present once with its audit line"
    )


def staged_cost(base: Path, big: int, n: int = 50) -> None:
    print(f"\ncommit one bash-made change (p50 of {n}): empty store vs {big} files")
    upper = base / "upper.md"
    upper.write_bytes(LINE.encode())
    bash = Provenance(workflow_id="run_bench@1", activity_type="lw.bash", role="planner")
    results: dict[str, float] = {}
    for label, files in (("empty store", 0), (f"{big} files", big)):
        stores = _plugin(base / f"staged-{files}").memory
        root = stores.root(STORE)
        for i in range(files):
            (root / f"d{i // 500}").mkdir(parents=True, exist_ok=True)
            (root / f"d{i // 500}" / f"f{i}.md").write_bytes(DOC)
        stores.recount(STORE)
        stores.commit_staged(STORE, [StoreChange("warm.md", "write", upper)], bash)
        lat = []
        for i in range(n):
            t = time.perf_counter()
            stores.commit_staged(STORE, [StoreChange(f"new{i}.md", "write", upper)], bash)
            lat.append(time.perf_counter() - t)
        results[label] = statistics.median(lat) * 1000
        print(f"  {label:<34} p50 {results[label]:7.3f} ms")
    empty, full = results.values()
    print(f"  -> ratio {full / empty:.2f}x (1.0 = independent of store size)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--appends", type=int, default=40)
    parser.add_argument("--big-store", type=int, default=5000)
    parser.add_argument("--no-bash", action="store_true", help="skip the lw.bash appends")
    parser.add_argument("--only-concurrent", action="store_true", help="only part 2")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of part 2")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lw-bench-") as tmp:
        base = Path(tmp)
        base.chmod(0o755)  # the sandbox user must be able to reach the data dirs inside
        if not args.only_concurrent:
            asyncio.run(appends(base, args.appends, not args.no_bash))
        multi_process(base, rounds=args.rounds)
        if not args.only_concurrent:
            staged_cost(base, args.big_store)


if __name__ == "__main__":
    main()
