"""Scale curve: trees of 100, 400 and 1,000 leaf agents, on one worker process and on
three sharing a data dir, against Temporal's own fan-out of the same shape in the same
run.

The lw tree is an ``lw.Orchestrator`` whose scripted model starts P ``lw.Planner``
sub-runs at once, each starting S ``lw.Worker`` steps at once, each step making one
``lw.bash`` call (sandboxed) and finishing: P x S leaves (10 x 10, 20 x 20, 25 x 40).
The baseline is plain parent/child workflows of the same shape whose leaves run the
same command through a plain subprocess activity. Every tree runs in worker processes
started for it (not timed); this process is only the client, so the figures are the
workers': wall time from start to result, leaves per second, worker CPU (with reaped
children: the sandboxes and subprocesses), each worker's resident memory after the tree
(and its peak), and history bytes per agent, summed over every workflow of the tree.

    python benchmarks/scale.py [--sizes 100,400,1000] [--workers 1,3]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from _bare_tree import COMMAND, run_tree
from temporalio.client import Client

SHAPES = {100: (10, 10), 400: (20, 20), 1000: (25, 40)}
LW_QUEUE, BARE_QUEUE = "scale-lw", "scale-bare"


def _shape(request: Any) -> tuple[int, int]:
    planners, steps = (int(x) for x in request.task.split("x"))
    return planners, steps


def _orchestrate(request: Any) -> list[Any]:
    from lw_temporal.testing import tool

    planners, steps = _shape(request)
    return [
        *(tool("plan_workflow", workflow=f"fan{i}", task=f"{planners}x{steps}")
          for i in range(planners)),
        tool("finish", summary="all done"),
    ]  # fmt: skip


def _plan(request: Any) -> list[Any]:
    from lw_temporal.testing import tool

    steps = _shape(request)[1]
    return [*(tool("run_step", task=str(j)) for j in range(steps)), tool("finish", summary="ok")]


def _plugin(data_dir: str) -> Any:
    """The plugin every worker process runs: one scripted model for every shape (the
    orchestrator's and planners' task says ``P x S``)."""
    from lw_temporal import LittleWorkflowPlugin, Role, WorkflowDefinition
    from lw_temporal.options import DeploymentOptions, OrchestratorOptions
    from lw_temporal.testing import ScriptedModel, ScriptKey, ScriptTurn, tool

    planners = max(p for p, _ in SHAPES.values())
    scripts: dict[ScriptKey, list[ScriptTurn]] = {(None, Role.ORCHESTRATOR): [_orchestrate]}
    for i in range(planners):
        scripts[(f"fan{i}", Role.PLANNER)] = [_plan]
        scripts[(f"fan{i}", Role.WORKER)] = [
            [tool("bash", command=COMMAND), tool("finish", summary="worked")]
        ]
    steps = max(s for _, s in SHAPES.values())
    return LittleWorkflowPlugin(
        data_dir,
        [
            WorkflowDefinition(id=f"fan{i}", max_children_per_turn=steps, max_children=steps)
            for i in range(planners)
        ],
        model=ScriptedModel(scripts),
        # the fan-out bounds raised to the largest shape (a call past one starts nothing)
        orchestrator=OrchestratorOptions(
            max_children_per_turn=planners, max_children=planners, max_tree_turns=100_000
        ),
        deployment=DeploymentOptions(search_attributes_registered=True),
    )


def _worker(target: str, data_dir: str, ready: Any, stop: Any) -> None:
    """One worker process: the lw plugin's worker and the bare tree's worker."""
    import importlib
    import sys

    from temporalio.worker import Worker

    from lw_temporal.testing import plugin_client

    # The bare workflows by an importable module name (the workflow sandbox re-imports
    # them; a spawned child's ``__mp_main__`` is not importable)
    sys.path.insert(0, str(Path(__file__).parent))
    bare = importlib.import_module("_bare_tree")

    async def main() -> None:
        base = await Client.connect(target)
        client = plugin_client(base, _plugin(data_dir))
        async with (
            Worker(client, task_queue=LW_QUEUE),
            Worker(
                client,
                task_queue=BARE_QUEUE,
                workflows=bare.WORKFLOWS,
                activities=bare.ACTIVITIES,
            ),
        ):
            ready.set()
            await asyncio.to_thread(stop.wait)

    asyncio.run(main())


def _proc_figures(pid: int) -> tuple[float, int, int]:
    """(CPU seconds with reaped children, resident KiB, peak resident KiB) of ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return cpu, int(status["VmRSS"].split()[0]), int(status["VmHWM"].split()[0])


def _server_cpu() -> float:
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if b"start-dev" in cmdline and int(fields[1]) == os.getpid():
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


async def _history_bytes(client: Client, workflow_id: str) -> tuple[int, int]:
    """(bytes, workflows) of the tree under ``workflow_id``, walking its children."""
    found: list[int] = []
    sem = asyncio.Semaphore(16)

    async def walk(wid: str) -> None:
        async with sem:
            history = await client.get_workflow_handle(wid).fetch_history()
        found.append(sum(event.ByteSize() for event in history.events))
        children = [
            e.child_workflow_execution_started_event_attributes.workflow_execution.workflow_id
            for e in history.events
            if e.HasField("child_workflow_execution_started_event_attributes")
        ]
        await asyncio.gather(*(walk(c) for c in children))

    await walk(workflow_id)
    return sum(found), len(found)


async def _tree(client: Client, kind: str, shape: tuple[int, int]) -> tuple[float, str]:
    from lw_temporal import AgentInput, AgentResult

    started = time.perf_counter()
    if kind == "lw":
        wid = f"pipeline_{uuid.uuid4().hex[:8]}"
        result = await client.execute_workflow(
            "lw.Orchestrator",
            AgentInput(task=f"{shape[0]}x{shape[1]}"),
            id=wid,
            task_queue=LW_QUEUE,
            result_type=AgentResult,
            execution_timeout=timedelta(hours=1),
        )
        assert result.summary == "all done", result
    else:
        wid = f"bare_{uuid.uuid4().hex[:8]}"
        code = await run_tree(client, BARE_QUEUE, *shape, wid)
        assert code == 0
    return time.perf_counter() - started, wid


async def main(sizes: list[int], worker_counts: list[int]) -> None:
    from lw_temporal.testing import dev_environment, plugin_client

    print(f"load before: {os.getloadavg()[0]:.2f} (1-min), {os.cpu_count()} cores")
    rows: list[str] = []
    async with dev_environment() as env:
        target = env.client.service_client.config.target_host
        ctx = multiprocessing.get_context("spawn")
        for count in worker_counts:
            with tempfile.TemporaryDirectory(prefix="lw-scale-") as data_dir:
                os.chmod(data_dir, 0o755)
                stop = ctx.Event()
                readies = [ctx.Event() for _ in range(count)]
                procs = [
                    ctx.Process(target=_worker, args=(target, data_dir, r, stop)) for r in readies
                ]
                for p in procs:
                    p.start()
                try:
                    for r in readies:
                        assert r.wait(timeout=300), "a worker did not start"
                    client = plugin_client(env.client, _plugin(data_dir))
                    await _tree(client, "bare", (2, 2))  # warm every path
                    await _tree(client, "lw", (2, 2))
                    base_rate: float | None = None
                    for size in sizes:
                        shape = SHAPES[size]
                        for kind in ("bare", "lw"):
                            cpu0 = sum(_proc_figures(p.pid or 0)[0] for p in procs)
                            server0 = _server_cpu()
                            wall, wid = await _tree(client, kind, shape)
                            figures = [_proc_figures(p.pid or 0) for p in procs]
                            cpu = sum(f[0] for f in figures) - cpu0
                            server = _server_cpu() - server0
                            history, agents = await _history_bytes(client, wid)
                            assert agents == 1 + shape[0] + size, f"{kind}: {agents} workflows"
                            rate = size / wall
                            if kind == "bare":
                                bare_rate, bare_cpu = rate, cpu + server
                                continue
                            if size == sizes[0]:
                                base_rate = rate
                            rss = "/".join(f"{f[1] // 1024}" for f in figures)
                            peak = "/".join(f"{f[2] // 1024}" for f in figures)
                            rows.append(
                                f"{count} worker{'s' if count > 1 else ' '} {size:>5} leaves "
                                f"({shape[0]}x{shape[1]}): {wall:6.1f}s {rate:5.1f} leaves/s "
                                f"({rate / bare_rate:.2f}x bare {bare_rate:5.1f}; "
                                f"{rate / (base_rate or rate):.2f}x of {sizes[0]}); "
                                f"CPU {cpu * 1000 / size:4.0f} ms/leaf worker "
                                f"+{server * 1000 / size:3.0f} server "
                                f"(bare {bare_cpu * 1000 / size:3.0f} in all); RSS {rss} MiB "
                                f"(peak {peak}); history {history / agents / 1024:5.1f} KiB "
                                f"per agent over {agents} workflows"
                            )
                            print(rows[-1], flush=True)
                finally:
                    stop.set()
                    for p in procs:
                        p.join(timeout=120)
    print(f"load after: {os.getloadavg()[0]:.2f} (1-min)")


def _sizes(text: str) -> list[int]:
    """``--sizes``: tree sizes this benchmark has a shape for (planners x steps)."""
    try:
        sizes = [int(s) for s in text.split(",")]
    except ValueError:
        sizes = []
    if not sizes or any(s not in SHAPES for s in sizes):
        known = ", ".join(f"{n} ({p}x{s})" for n, (p, s) in SHAPES.items())
        raise argparse.ArgumentTypeError(
            f"{text!r}: give a comma-separated list of these sizes: {known}"
        )
    return sizes


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=_sizes, default="100,400,1000")
    parser.add_argument("--workers", default="1,3")
    args = parser.parse_args()
    asyncio.run(main(args.sizes, [int(w) for w in args.workers.split(",")]))
