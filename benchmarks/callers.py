"""Caller checks' cost: the sample pipeline with lw's caller checks on against off.

Each round runs the sample pipeline (orchestrator, two planners, five steps: 32 model
turns, 16 commands, memory writes) on one dev server, once per setup, alternately:
with the checks on (every lw activity's calling run confirmed, its chain's claim on
its workflow ID recorded) and off (what lw did before them), each with the model called
as a local activity (the scripted model's default: a local activity passes what its own
workflow knows, and the run's regular activities on this worker find it confirmed) and
as a regular activity (a remote LLM's default: one ``describe`` per run, cached). The
printed ratios are the checked median wall time over the unchecked one of the same
mode, measured in the same run, with the describes one checked pipeline made.

    python benchmarks/callers.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
from pathlib import Path

from _sample_pipeline import run_pipeline, sample_plugin
from temporalio.client import Client
from temporalio.worker import Worker

from lw_temporal import LittleWorkflowPlugin
from lw_temporal.options import ModelCallOptions
from lw_temporal.testing import dev_environment

#: (name, caller checks on, model as a local activity)
SETUPS = (
    ("local-on", True, True),
    ("local-off", False, True),
    ("regular-on", True, False),
    ("regular-off", False, False),
)


async def main(rounds: int) -> None:
    async with dev_environment() as env:
        target = env.client.service_client.config.target_host
        times: dict[str, list[float]] = {name: [] for name, _, _ in SETUPS}
        describes: dict[str, int] = {}
        with tempfile.TemporaryDirectory() as tmp:
            os.chmod(tmp, 0o711)  # the sandbox user must pass through to the data dirs
            clients: dict[str, Client] = {}
            plugins: dict[str, LittleWorkflowPlugin] = {}
            for name, checked, local in SETUPS:
                plugin = sample_plugin(
                    Path(tmp) / name, model_calls=ModelCallOptions(local_activity=local)
                )
                plugin.config.callers.enabled = checked
                plugins[name] = plugin
                clients[name] = await Client.connect(target, plugins=[plugin])
            workers = [Worker(clients[name], task_queue=name) for name, _, _ in SETUPS]
            for worker in workers:
                await worker.__aenter__()
            try:
                for name in times:  # warm up every setup, counting one pipeline's describes
                    callers = plugins[name].config.callers
                    before = callers.describes
                    await run_pipeline(clients[name], name)
                    describes[name] = callers.describes - before
                for _ in range(rounds):
                    for name in times:
                        times[name].append(await run_pipeline(clients[name], name))
            finally:
                for worker in reversed(workers):
                    await worker.__aexit__(None, None, None)
    median = {name: statistics.median(t) for name, t in times.items()}
    print(f"sample pipeline (8 runs), {rounds} rounds")
    for mode in ("local", "regular"):
        on, off = median[f"{mode}-on"], median[f"{mode}-off"]
        print(
            f"  model as a {mode} activity: checks off {off * 1000:7.1f} ms, on "
            f"{on * 1000:7.1f} ms ({describes[f'{mode}-on']} describes): "
            f"ratio on/off {on / off:.3f}x"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    asyncio.run(main(parser.parse_args().rounds))
