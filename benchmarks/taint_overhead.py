"""What taint costs a run that is not tainted, measured against the same worker with the
taint gate taken out, in the same run.

    python benchmarks/taint_overhead.py [--appends 200] [--checks 20000]

1. One-line ``lw.memory.append`` activities of an untainted planner (in-process by
   ``ActivityEnvironment``), the gate installed against the gate removed, in
   alternating rounds on the same store: p50 latency of each and their ratio
   (target: 1.00x within noise).
2. The taint check itself for an untainted run (``TaintGate.tainted``), per call,
   against one ``os.stat`` of a path that does not exist (what it is meant to cost),
   and for an untainted run one of whose commands could reach the network (its tree
   then has an empty taint folder the check lists).
3. For comparison, the same append by a tainted planner (held in quarantine).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from temporalio.testing import ActivityEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal.memory import MemoryAppendRequest, MemoryStores

CLEAN = "run_bench@clean"
TAINTED = "run_bench@tainted"
NETWORKED = "run_bench@networked"
LINE = "- a lesson learned while benchmarking the taint gate, one line.\n"
ROUNDS = 10


class _Planner:
    """Runs activities as a planner of ``workflow_id``, a new activity id per call."""

    def __init__(self, workflow_id: str) -> None:
        self.env = ActivityEnvironment()
        self.workflow_id = workflow_id
        self.calls = 0

    async def append(self, plugin: LittleWorkflowPlugin, path: str) -> float:
        self.calls += 1
        self.env.info = dataclasses.replace(
            self.env.info,
            workflow_id=self.workflow_id,
            workflow_type="lw.Planner",
            activity_id=f"a-{self.calls}",
        )
        request = MemoryAppendRequest(path=path, content=LINE)
        started = time.perf_counter()
        result: Any = await self.env.run(plugin.memory_activities.append, request)
        elapsed = time.perf_counter() - started
        assert result.held == (self.workflow_id == TAINTED), result
        return elapsed


async def appends(base: Path, n: int) -> None:
    plugin = LittleWorkflowPlugin(base / "data", [WorkflowDefinition(id="bench")])
    # Run in an ActivityEnvironment, so without caller checks (there is no server to
    # confirm the caller; benchmarks/callers.py measures what they add).
    plugin.config.callers.enabled = False
    stores: MemoryStores = plugin.memory
    gate = stores.gate
    assert gate is not None
    clean, tainted = _Planner(CLEAN), _Planner(TAINTED)
    path = "/mnt/memory/workflow/lessons.md"
    await clean.append(plugin, path)  # warm up: caches, the index, the store's folders
    with_gate: list[float] = []
    without: list[float] = []
    per_round = max(n // ROUNDS, 1)
    for _ in range(ROUNDS):
        stores.gate = gate
        with_gate += [await clean.append(plugin, path) for _ in range(per_round)]
        stores.gate = None
        without += [await clean.append(plugin, path) for _ in range(per_round)]
    stores.gate = gate
    gate.book.taint(TAINTED, "task", "benchmark: marked untrusted")
    await tainted.append(plugin, path)
    held = [await tainted.append(plugin, path) for _ in range(per_round * ROUNDS)]
    a, b, h = (statistics.median(x) * 1e3 for x in (with_gate, without, held))
    print(f"lw.memory.append of an untainted planner, p50 of {per_round * ROUNDS} each")
    print(f"  gate installed  {a:8.3f} ms")
    print(f"  gate removed    {b:8.3f} ms")
    print(f"  ratio           {a / b:8.2f}x")
    print(f"  tainted (held)  {h:8.3f} ms  ({h / b:.2f}x; for comparison)")


def checks(base: Path, n: int) -> None:
    plugin = LittleWorkflowPlugin(base / "checks", [WorkflowDefinition(id="bench")])
    gate = plugin.memory.gate
    assert gate is not None
    gate.tainted(CLEAN)  # warm up: the tree folder's name is cached
    missing = str(base / "checks" / "not-there")
    started = time.perf_counter()
    for _ in range(n):
        gate.tainted(CLEAN)
    check = (time.perf_counter() - started) / n
    # A run whose command reached for the network and read nothing: its tree has a
    # (settled, empty) taint folder, so the check lists it.
    gate.book.network_begins(NETWORKED)
    gate.book.network_settled(NETWORKED)
    assert gate.tainted(NETWORKED) is None
    started = time.perf_counter()
    for _ in range(n):
        gate.tainted(NETWORKED)
    networked = (time.perf_counter() - started) / n
    started = time.perf_counter()
    for _ in range(n):
        os.path.isdir(missing)
    stat = (time.perf_counter() - started) / n
    print(f"taint check of an untainted run, mean of {n}")
    print(f"  TaintGate.tainted           {check * 1e6:6.2f} us  ({check / stat:.2f}x)")
    print(f"  after a network command     {networked * 1e6:6.2f} us  ({networked / stat:.2f}x)")
    print(f"  one missing stat            {stat * 1e6:6.2f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--checks", type=int, default=20000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lw-taint-bench-") as tmp:
        asyncio.run(appends(Path(tmp), args.appends))
        checks(Path(tmp), args.checks)


if __name__ == "__main__":
    main()
