"""Ordinary agent tasks through the real ``lw.bash``, on bubblewrap and on Landlock.

Each task of ``tests/_task_corpus.py`` (git, Python with sqlite, multiprocessing,
asyncio and venvs, make, cc, node, archives, pipelines, heredocs, memory edits as a
planner...) runs as a fresh agent through the activity itself (``ActivityEnvironment``
with a real activity info, so the scope comes from the workflow ID as in production),
on each backend. Printed per backend: how many tasks worked as on a developer's
machine, how many lw.bash refused saying why (a pre-check refusal, or a ``hint``
naming a documented gap of the backend), how many failed otherwise, and the name and
reason of every task that did not work. Tasks whose programs are missing are skipped
and counted.

Usage: python benchmarks/agent_tasks.py [--backend bwrap|landlock] [--only NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from temporalio.testing import ActivityEnvironment

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lw_temporal import BashRequest, BashResult, WorkflowDefinition
from lw_temporal._bash import BashActivities
from lw_temporal._config import LwConfig
from lw_temporal.ids import parse_workflow_id
from tests._task_corpus import TASKS, Task, available, run_task, seed_stores


async def run_backend(sandbox: str, tasks: Sequence[Task]) -> None:
    with tempfile.TemporaryDirectory() as base:
        os.chmod(base, 0o755)  # the sandbox user must reach the data dir
        config = LwConfig.create(Path(base) / "data", [WorkflowDefinition(id="cr")])
        # An ActivityEnvironment has no server to confirm the calling run with
        # (benchmarks/callers.py measures what that check adds).
        config.callers.enabled = False
        activities = BashActivities(config, sandbox=sandbox)
        await activities.ready_backend()
        outcomes: collections.Counter[str] = collections.Counter()
        details: list[tuple[str, str, str]] = []
        started = time.perf_counter()
        for number, item in enumerate(tasks):
            if not available(item):
                outcomes["skipped"] += 1
                continue
            seed_stores(config.layout)
            planner = f"run_cr@{sandbox}-{number}"
            agent = planner if item.role == "planner" else f"{planner}/steps/step_1"

            async def run(agent: str, commands: Sequence[str]) -> list[BashResult]:
                env = ActivityEnvironment()
                env.info = dataclasses.replace(
                    env.info,
                    workflow_id=agent,
                    workflow_type=parse_workflow_id(agent).workflow_type,
                )
                return [await env.run(activities.bash, BashRequest(command=c)) for c in commands]

            outcome, why = await run_task(run, agent, item)
            outcomes[outcome] += 1
            if outcome != "worked":
                details.append((outcome, item.name, why))
        took = time.perf_counter() - started
        ran = sum(outcomes[k] for k in ("worked", "refused", "failed"))
        print(
            f"\n[{sandbox}] {ran} tasks in {took:.1f}s: {outcomes['worked']} worked, "
            f"{outcomes['refused']} refused with a reason, {outcomes['failed']} failed"
            + (f", {outcomes['skipped']} skipped (programs missing)" if outcomes["skipped"] else "")
        )
        for kind, name, why in sorted(details):
            print(f"  {kind:<8} {name}: {why.splitlines()[-1] if why else ''}"[:400])


async def main(backends: Sequence[str], only: str | None) -> None:
    print(f"load: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores")
    tasks = [t for t in TASKS if only is None or only in t.name]
    print(f"{len(tasks)} tasks")
    for sandbox in backends:
        await run_backend(sandbox, tasks)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("bwrap", "landlock"), action="append")
    parser.add_argument("--only", help="run the tasks whose name contains this")
    args = parser.parse_args()
    asyncio.run(main(args.backend or ["bwrap", "landlock"], args.only))
