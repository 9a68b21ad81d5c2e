"""Several hosts: sample pipelines per second for 1, 2 and 3 worker processes, with
the data dir on one shared volume vs pinned runs (one memory root, a runs root and
``--host`` per worker), on one dev server, in the same run.

Every worker is a real ``lw-temporal worker`` process running the sample pipeline's
scripted model; a configuration's workers start first (not timed), then
``--pipelines`` pipelines start at once and the time until the last one finishes is
measured. A pinned worker calls the model as a regular activity on its host queue (a
turn may save to scratch), so the shared volume is measured both ways: with the
scripted model's default local activity, and with regular model activities (the
like-for-like baseline of "pinned/shared"). Ratios are against one shared-volume
worker measured in the same run. The workers share this machine's cores, so more
processes show the topology's overhead more than a gain; the core count is printed.

    python benchmarks/hosts.py [--pipelines 6] [--rounds 1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, LittleWorkflowPlugin
from lw_temporal.testing import ScriptedModel, dev_environment
from workflows.pipeline import DEFINITIONS, SCRIPTS

EXPECTED = "candidate Dana Reyes reviewed and scored 8/10"
LOCAL_MODEL = "workflows.pipeline:sample_model"
REGULAR_MODEL = "benchmarks.hosts:sample_model_as_activity"
CONFIGS = ("shared, local model", "shared", "pinned")


class _RegularTurns(ScriptedModel):
    local_activity = False


def sample_model_as_activity() -> ScriptedModel:
    """The sample model called as a regular activity, as remote LLMs are."""
    return _RegularTurns(SCRIPTS)


async def _worker(
    address: str, task_queue: str, flags: list[str], model: str
) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "lw_temporal._cli",
        "worker",
        "--address",
        address,
        "--task-queue",
        task_queue,
        "--definitions",
        "workflows.pipeline:DEFINITIONS",
        "--model",
        model,
        "--create",  # each configuration's folders are new
        *flags,
        stdout=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), timeout=120)
    if not line.startswith(b"ready"):
        raise SystemExit(f"worker did not start: {line!r}")
    return proc


async def _measure(
    env: WorkflowEnvironment, root: Path, workers: int, config: str, pipelines: int
) -> float:
    """Pipelines per second of one configuration."""
    tag = uuid.uuid4().hex[:8]
    task_queue = f"hosts-{tag}"
    base = root / tag
    model = LOCAL_MODEL if config == "shared, local model" else REGULAR_MODEL
    if config == "pinned":
        memory = str(base / "memory")
        flags = [
            ["--memory-root", memory, "--runs-root", str(base / f"runs-{n}"), "--host", f"h{n}"]
            for n in range(workers)
        ]
    else:
        flags = [["--data-dir", str(base / "data")]] * workers
    address = env.client.service_client.config.target_host
    # Start one first: it creates the memory root's id that the others then find.
    procs = [await _worker(address, task_queue, flags[0], model)]
    procs += await asyncio.gather(*(_worker(address, task_queue, f, model) for f in flags[1:]))
    client_config = env.client.config()
    # The client seals what it sends with the workers' keys: their memory root's store.
    keys = base / ("memory" if config == "pinned" else "data")
    client_config["plugins"] = [LittleWorkflowPlugin(keys, DEFINITIONS)]
    client = Client(**client_config)
    try:
        start = time.perf_counter()
        handles = [
            await client.start_workflow(
                "lw.Orchestrator",
                AgentInput(),
                id=f"pipeline_{tag}-{n}",
                task_queue=task_queue,
                result_type=AgentResult,
            )
            for n in range(pipelines)
        ]
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 600)
        elapsed = time.perf_counter() - start
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            await proc.wait()
    assert {r.summary for r in results} == {EXPECTED}
    return pipelines / elapsed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipelines", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    async with dev_environment() as env:
        rates: dict[tuple[int, str], list[float]] = {}
        with tempfile.TemporaryDirectory(prefix="lw-bench-hosts-") as tmp:
            os.chmod(tmp, 0o755)  # the agents' ids pass through it to the data dirs
            for _ in range(args.rounds):
                for workers in (1, 2, 3):
                    for config in CONFIGS:
                        rate = await _measure(env, Path(tmp), workers, config, args.pipelines)
                        rates.setdefault((workers, config), []).append(rate)
    cores = os.cpu_count()
    usable = len(os.sched_getaffinity(0))
    print(f"machine: {cores} cores ({usable} usable); {args.pipelines} pipelines at once")
    baseline = max(rates[(1, "shared")])
    print(f"pipelines per second (best of {args.rounds}); 'vs 1' is against 1 shared worker")
    print("workers  shared,local-model  shared  pinned  pinned/shared  shared vs 1  pinned vs 1")
    for workers in (1, 2, 3):
        local, shared, pin = (max(rates[(workers, c)]) for c in CONFIGS)
        print(
            f"{workers:>7}  {local:>18.2f}  {shared:>6.2f}  {pin:>6.2f}  {pin / shared:>13.2f}"
            f"  {shared / baseline:>11.2f}  {pin / baseline:>11.2f}"
        )


if __name__ == "__main__":
    asyncio.run(main())
    # The SDK's native threads can crash CPython's teardown (temporalio/sdk-python#300).
    sys.stdout.flush()
    os._exit(0)
