"""Payload encryption overhead: the sample pipeline with privacy on (the default)
against ``PrivacyOptions(encrypt=False)``.

Each round runs the sample pipeline (orchestrator, two planners, five steps: 32 model
turns, 16 commands, memory writes) on one dev server twice, alternately: once on a
worker whose plugin seals every payload with its tree's key (AES-256-GCM, keys in the
data dir), once on a worker that stores payloads readable. Both are timed the same way
(start to result, from the same client process). The printed ratio is the sealed
median wall time over the plain one, measured in the same run; the issue's budget is
1.10.

    python benchmarks/privacy_overhead.py [--rounds 7]
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

from lw_temporal.options import PrivacyOptions
from lw_temporal.testing import dev_environment


async def main(rounds: int) -> None:
    async with dev_environment() as env:
        target = env.client.service_client.config.target_host
        times: dict[str, list[float]] = {"sealed": [], "plain": []}
        with tempfile.TemporaryDirectory() as tmp:
            os.chmod(tmp, 0o711)  # the sandbox user must pass through to the data dirs
            clients: dict[str, Client] = {}
            for name, encrypt in (("sealed", True), ("plain", False)):
                plugin = sample_plugin(Path(tmp) / name, privacy=PrivacyOptions(encrypt=encrypt))
                clients[name] = await Client.connect(target, plugins=[plugin])
            async with (
                Worker(clients["sealed"], task_queue="sealed"),
                Worker(clients["plain"], task_queue="plain"),
            ):
                for name in times:  # warm up both
                    await run_pipeline(clients[name], name)
                for index in range(rounds):
                    order = list(times) if index % 2 == 0 else list(reversed(times))
                    for name in order:
                        times[name].append(await run_pipeline(clients[name], name))
            keys = len(list((Path(tmp) / "sealed" / ".lw" / "keys").glob("*.key")))
    sealed, plain = (statistics.median(times[n]) for n in ("sealed", "plain"))
    print(f"sample pipeline, {rounds} rounds ({keys} tree keys made), load {os.getloadavg()}")
    print(f"  plain : median {plain * 1000:7.1f} ms")
    print(f"  sealed: median {sealed * 1000:7.1f} ms")
    print(f"  ratio sealed/plain: {sealed / plain:.3f}x (budget 1.10x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    asyncio.run(main(parser.parse_args().rounds))
