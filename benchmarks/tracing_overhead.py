"""Tracing and metrics overhead: the sample pipeline with ``tracing=`` on against off.

Each round runs the sample pipeline (orchestrator, two planners, five steps: 32 model
turns, 16 commands, memory writes) on one dev server twice, alternately: once with a
plugin traced into an in-memory span exporter and metrics into a ``MetricBuffer``
runtime, once with neither. The printed ratio is the traced median wall time over the
untraced one, measured in the same run.

    python benchmarks/tracing_overhead.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client
from temporalio.runtime import MetricBuffer, Runtime, TelemetryConfig
from temporalio.worker import Worker

from lw_temporal import AgentInput, AgentResult, LittleWorkflowPlugin
from lw_temporal._demo import _seed_org_memory
from lw_temporal.ids import DataLayout
from lw_temporal.testing import dev_environment
from workflows.pipeline import DEFINITIONS, sample_model


async def _pipeline(client: Client, task_queue: str) -> float:
    started = time.perf_counter()
    await client.execute_workflow(
        "lw.Orchestrator",
        AgentInput(task="Review and score candidate Dana Reyes for job ABC-123."),
        id=f"pipeline_{uuid.uuid4().hex[:10]}",
        task_queue=task_queue,
        result_type=AgentResult,
    )
    return time.perf_counter() - started


async def main(rounds: int) -> None:
    async with dev_environment() as env:
        target = env.client.service_client.config.target_host
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        buffer = MetricBuffer(100_000)
        metered = Runtime(telemetry=TelemetryConfig(metrics=buffer))
        times: dict[str, list[float]] = {"traced": [], "plain": []}
        spans = 0
        with tempfile.TemporaryDirectory() as tmp:
            os.chmod(tmp, 0o711)  # the sandbox user must pass through to the data dirs
            clients: dict[str, Client] = {}
            setups: tuple[tuple[str, TracerProvider | bool, Runtime | None], ...] = (
                ("traced", provider, metered),
                ("plain", False, None),
            )
            for name, tracing, runtime in setups:
                data_dir = Path(tmp) / name
                _seed_org_memory(DataLayout.at(data_dir))
                plugin = LittleWorkflowPlugin(
                    data_dir, DEFINITIONS, model=sample_model(), tracing=tracing
                )
                clients[name] = await Client.connect(target, plugins=[plugin], runtime=runtime)
            async with (
                Worker(clients["traced"], task_queue="traced"),
                Worker(clients["plain"], task_queue="plain"),
            ):
                for name in times:  # warm up both
                    await _pipeline(clients[name], name)
                exporter.clear()
                buffer.retrieve_updates()
                for _ in range(rounds):
                    for name in times:
                        times[name].append(await _pipeline(clients[name], name))
                    spans += len(exporter.get_finished_spans())
                    exporter.clear()
                    buffer.retrieve_updates()
    traced, plain = (statistics.median(times[n]) for n in ("traced", "plain"))
    print(f"sample pipeline, {rounds} rounds, {spans // rounds} spans per traced pipeline")
    print(f"  plain : median {plain * 1000:7.1f} ms")
    print(f"  traced: median {traced * 1000:7.1f} ms")
    print(f"  ratio traced/plain: {traced / plain:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    asyncio.run(main(parser.parse_args().rounds))
