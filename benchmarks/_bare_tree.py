"""Temporal's own fan-out, the baseline that ``fanout.py`` and ``scale.py`` time lw
against: plain parent/child workflows of the lw tree's shape whose leaves run the same
command through a plain subprocess activity. One module for both, so the two
benchmarks measure one baseline the same way.

Import it by this module's name (the workflow sandbox re-imports workflow modules, and
a spawned worker's ``__mp_main__`` is not importable).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client

#: What every leaf runs, lw's and the bare tree's alike.
COMMAND = "echo step done"


@activity.defn(name="bench.bare.subprocess")
async def run_subprocess(command: str) -> int:
    proc = await asyncio.create_subprocess_exec(
        "bash", "-c", command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    await proc.communicate()
    return proc.returncode or 0


@workflow.defn(name="bench.bare.Leaf")
class Leaf:
    @workflow.run
    async def run(self, command: str) -> int:
        result: int = await workflow.execute_activity(
            "bench.bare.subprocess", command, start_to_close_timeout=timedelta(minutes=10)
        )
        return result


@workflow.defn(name="bench.bare.Node")
class Node:
    @workflow.run
    async def run(self, steps: int) -> int:
        base = workflow.info().workflow_id
        codes = await asyncio.gather(
            *(
                workflow.execute_child_workflow("bench.bare.Leaf", COMMAND, id=f"{base}/leaf_{i}")
                for i in range(steps)
            )
        )
        return sum(codes)


@workflow.defn(name="bench.bare.Root")
class Root:
    @workflow.run
    async def run(self, shape: list[int]) -> int:
        base = workflow.info().workflow_id
        planners, steps = shape
        codes = await asyncio.gather(
            *(
                workflow.execute_child_workflow("bench.bare.Node", steps, id=f"{base}/node_{i}")
                for i in range(planners)
            )
        )
        return sum(codes)


#: What a worker of the bare tree registers.
WORKFLOWS: list[type[Any]] = [Root, Node, Leaf]
ACTIVITIES = [run_subprocess]


async def run_tree(
    client: Client, task_queue: str, planners: int, steps: int, workflow_id: str
) -> int:
    """Run one bare tree of ``planners`` x ``steps`` leaves; the sum of their exit codes."""
    code: int = await client.execute_workflow(
        "bench.bare.Root", [planners, steps], id=workflow_id, task_queue=task_queue
    )
    return code
