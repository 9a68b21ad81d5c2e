"""How the cost of one dream grows with the number of runs it reads.

Records 50, 200 and 500 finished planner runs (each with its own definition id, so
each dream reads exactly its N) on an embedded Temporal dev server, then times one
``lw.Dreaming`` of each from start to "awaiting approval": listing the runs,
fetching and extracting every history (and its step's), and consolidating. The
50-run dream is the baseline; a linear cost shows as a per-run time that stays flat
and a time ratio close to the run ratio. The default consolidator alone is also timed
over the same extracted records. Then each target gets 10 more runs and a second dream:
its cursor makes it read only the new runs, so its time stays flat (ratio ~1.0)
whatever the number of runs before.

Run: ``python benchmarks/dreaming.py [--sizes 50,200,500] [--batch-size 50]``
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from lw_temporal import BashRequest, BashResult, DreamContext, RunRecord, WorkflowDefinition
from lw_temporal._config import LwConfig
from lw_temporal._plugin import _passthrough
from lw_temporal.dreaming import (
    DefaultConsolidator,
    DreamInput,
    DreamOptions,
    DreamState,
    DreamStatus,
    reject_dream,
)
from lw_temporal.dreaming._activities import DreamingActivities
from lw_temporal.dreaming._records import QUERY_STATE
from lw_temporal.dreaming._workflow import DreamingWorkflow
from lw_temporal.ids import DataLayout, parse_workflow_id
from lw_temporal.memory import MemoryAppendRequest
from lw_temporal.testing import dev_environment

TASK_QUEUE = "bench-dreaming"
#: The recorded runs' stand-in workflows run unsandboxed on their own queue: recording
#: is set-up, not what is measured, and must not crowd the 2-core box for minutes.
RUNS_QUEUE = "bench-dreaming-runs"
#: Runs recorded after the first dream of each size; the second dream reads only these.
NEW = 10


class Script(BaseModel):
    seed: int


@activity.defn(name="lw.bash")
async def bash(request: BashRequest) -> BashResult:
    return BashResult(exit_code=int(request.command.rsplit(" ", 1)[1]) % 3, stdout="", stderr="")


@activity.defn(name="lw.memory.append")
async def append(request: MemoryAppendRequest) -> None:
    return None


@workflow.defn(name="lw.Worker")
class BenchStep:
    @workflow.run
    async def run(self, script: Script) -> None:
        await workflow.execute_activity(
            "lw.bash",
            BashRequest(command=f"pytest -k case{script.seed % 7} {script.seed}"),
            result_type=BashResult,
            start_to_close_timeout=timedelta(seconds=60),
        )


@workflow.defn(name="lw.Planner")
class BenchPlanner:
    """A run shaped like an agent's: commands (some failing), a lesson, one step."""

    @workflow.run
    async def run(self, script: Script) -> None:
        for n in range(3):
            await workflow.execute_activity(
                "lw.bash",
                BashRequest(command=f"make check-{n} {script.seed + n}"),
                result_type=BashResult,
                start_to_close_timeout=timedelta(seconds=60),
            )
        await workflow.execute_activity(
            "lw.memory.append",
            MemoryAppendRequest(
                path="/mnt/memory/workflow/lessons.md",
                content=f"- lesson {script.seed % 11}: check inputs first\n",
            ),
            start_to_close_timeout=timedelta(seconds=60),
        )
        await workflow.execute_child_workflow(
            "lw.Worker", script, id=f"{workflow.info().workflow_id}/steps/step_1"
        )


async def record_runs(client: Client, definition: str, count: int, first: int = 0) -> None:
    async def one(seed: int) -> None:
        await client.execute_workflow(
            "lw.Planner",
            Script(seed=seed),
            id=f"run_{definition}@{seed}",
            task_queue=RUNS_QUEUE,
        )

    for start in range(first, first + count, 25):
        await asyncio.gather(*(one(s) for s in range(start, min(first + count, start + 25))))


async def wait_listed(client: Client, definition: str, count: int) -> None:
    query = "WorkflowType = 'lw.Planner' AND ExecutionStatus = 'Completed'"
    while True:
        seen = 0
        async for execution in client.list_workflows(query):
            if parse_workflow_id(execution.id).definition_id == definition:
                seen += 1
        if seen >= count:
            return
        await asyncio.sleep(0.5)


async def dream(client: Client, definition: str, batch_size: int) -> tuple[str, float, int]:
    started = time.perf_counter()
    handle = await client.start_workflow(
        "lw.Dreaming",
        DreamInput(target=definition, options=DreamOptions(batch_size=batch_size)),
        id=f"dream_{definition}@{uuid.uuid4().hex[:8]}",
        task_queue=TASK_QUEUE,
    )
    while True:
        state: DreamState = await handle.query(QUERY_STATE, result_type=DreamState)
        if state.status is DreamStatus.AWAITING_APPROVAL:
            break
        if state.status not in (
            DreamStatus.COLLECTING, DreamStatus.DREAMING, DreamStatus.CONSOLIDATING
        ):  # fmt: skip
            raise SystemExit(f"dream {handle.id} of {definition} ended {state.status}: {state}")
        await asyncio.sleep(0.05)
    elapsed = time.perf_counter() - started
    await reject_dream(client, handle.id, "benchmark", "measurement only")
    return handle.id, elapsed, state.runs


def consolidate_only(layout: DataLayout, dream_id: str, target: str) -> float:
    batches = layout.scratch(parse_workflow_id(dream_id)) / "dream" / "batches"
    records = [
        RunRecord.model_validate_json(line)
        for path in sorted(batches.glob("*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]
    best = float("inf")
    for _ in range(20):
        started = time.perf_counter()
        DefaultConsolidator().consolidate(
            DreamContext(target=target, workflow_id=dream_id), iter(records)
        )
        best = min(best, time.perf_counter() - started)
    return best


async def main(sizes: Sequence[int], batch_size: int) -> None:
    async with dev_environment() as env:
        with tempfile.TemporaryDirectory() as tmp:
            layout = DataLayout.at(Path(tmp))
            definitions = {n: f"bench-{n}" for n in sizes}
            config = LwConfig.create(tmp, [WorkflowDefinition(id=d) for d in definitions.values()])
            client = Client(**env.client.config() | {"data_converter": pydantic_data_converter})
            # The runs' queue is one this deployment serves, as a plugin's worker of it
            # says (a dream reads only runs it can tell this deployment ran).
            config.callers.serve(RUNS_QUEUE)
            dreaming = DreamingActivities(config)
            async with (
                Worker(
                    client,
                    task_queue=RUNS_QUEUE,
                    workflows=[BenchPlanner, BenchStep],
                    activities=[bash, append],
                    workflow_runner=UnsandboxedWorkflowRunner(),
                ),
                Worker(
                    client,
                    task_queue=TASK_QUEUE,
                    workflows=[DreamingWorkflow],
                    activities=dreaming.callables,
                    # the workflow sandbox as the plugin sets it up (lw_temporal passed
                    # through), as a worker of the plugin runs lw.Dreaming
                    workflow_runner=_passthrough(None),
                ),
            ):
                for n, definition in definitions.items():
                    started = time.perf_counter()
                    await record_runs(client, definition, n)
                    await wait_listed(client, definition, n)
                    print(f"recorded {n} runs in {time.perf_counter() - started:.1f}s")
                rows: list[tuple[int, float, float, int]] = []
                for n, definition in definitions.items():
                    dream_id, elapsed, runs = await dream(client, definition, batch_size)
                    assert runs == n, f"dream of {definition} read {runs} runs, not {n}"
                    rows.append((n, elapsed, consolidate_only(layout, dream_id, definition), runs))
                # The next dream of each target, after NEW more runs: its cursor makes it
                # read only those, however many runs came before.
                incremental: list[float] = []
                for n, definition in definitions.items():
                    await record_runs(client, definition, NEW, first=n)
                    await wait_listed(client, definition, n + NEW)
                    _, elapsed, runs = await dream(client, definition, batch_size)
                    assert runs == NEW, f"the next dream of {definition} read {runs} runs"
                    incremental.append(elapsed)

    base_n, base_t, base_c, _ = rows[0]
    print()
    print(
        f"{'runs':>6} {'dream s':>9} {'ms/run':>8} {'time ratio':>11} {'run ratio':>10}"
        f" {'consolidate ms':>15} {'ratio':>7}"
    )
    for n, elapsed, consolidation, _ in rows:
        print(
            f"{n:>6} {elapsed:>9.2f} {1000 * elapsed / n:>8.2f} {elapsed / base_t:>11.2f}"
            f" {n / base_n:>10.1f} {1000 * consolidation:>15.2f}"
            f" {consolidation / base_c:>7.2f}"
        )
    print()
    print(f"{'runs before':>12} {'next dream s':>13} {'ratio':>7}   (each reads {NEW} new runs)")
    for (n, *_), elapsed in zip(rows, incremental, strict=True):
        print(f"{n:>12} {elapsed:>13.2f} {elapsed / incremental[0]:>7.2f}")
    n_last, t_last, _, _ = rows[-1]
    print()
    print(
        f"per-run cost at {n_last} runs is {(t_last / n_last) / (base_t / base_n):.2f}x "
        f"the per-run cost at {base_n} runs (1.00 = perfectly linear)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,200,500")
    parser.add_argument("--batch-size", type=int, default=50)
    args = parser.parse_args()
    asyncio.run(main([int(s) for s in args.sizes.split(",")], args.batch_size))
