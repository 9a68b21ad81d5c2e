"""Tracing and metrics overhead: the sample pipeline with ``tracing=True`` against off.

Each round runs the sample pipeline (orchestrator, two planners, five steps: 32 model
turns, 16 sandboxed commands, memory writes) on one dev server twice, alternately: once
with ``tracing=True`` as a user turns it on (its default exporter: OTLP/HTTP to whatever
the ``OTEL_*`` variables name, by default ``localhost:4318``, where usually no collector
listens) and metrics into a ``MetricBuffer`` runtime, once with neither. Both sides
must run every command of the pipeline without a failed tool call (counted from the
``lw.progress`` of every workflow of each tree). The printed ratio is the traced median
wall time over the untraced one, measured in the same run.

    python benchmarks/tracing_overhead.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import uuid
from pathlib import Path

import opentelemetry.trace
from _sample_pipeline import run_pipeline, sample_plugin
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from temporalio.client import Client
from temporalio.runtime import MetricBuffer, Runtime, TelemetryConfig
from temporalio.worker import Worker

from lw_temporal._live import fetch_tree
from lw_temporal._telemetry._export import collector_listening, describe_export, otlp_endpoint
from lw_temporal.testing import dev_environment


class _Count(SpanProcessor):
    """Counts finished spans (beside the default exporter's processor)."""

    def __init__(self) -> None:
        self.ended = 0

    def on_end(self, span: ReadableSpan) -> None:
        self.ended += 1


async def _pipeline(client: Client, task_queue: str) -> tuple[float, int]:
    """Wall time of one pipeline, and how many tool calls failed in its tree."""
    workflow_id = f"pipeline_{uuid.uuid4().hex[:10]}"
    elapsed = await run_pipeline(client, task_queue, workflow_id)
    tree = await fetch_tree(client, workflow_id) or []
    return elapsed, sum(n.progress.failed_tools for n in tree if n.progress)


async def main(rounds: int) -> None:
    async with dev_environment() as env:
        target = env.client.service_client.config.target_host
        buffer = MetricBuffer(100_000)
        metered = Runtime(telemetry=TelemetryConfig(metrics=buffer))
        times: dict[str, list[float]] = {"traced": [], "plain": []}
        failed = {"traced": 0, "plain": 0}
        counter = _Count()
        with tempfile.TemporaryDirectory() as tmp:
            os.chmod(tmp, 0o711)  # the sandbox user must pass through to the data dirs
            clients: dict[str, Client] = {}
            setups: tuple[tuple[str, bool, Runtime | None], ...] = (
                ("traced", True, metered),
                ("plain", False, None),
            )
            for name, tracing, runtime in setups:
                plugin = sample_plugin(Path(tmp) / name, tracing=tracing)
                clients[name] = await Client.connect(target, plugins=[plugin], runtime=runtime)
            provider = opentelemetry.trace.get_tracer_provider()
            assert isinstance(provider, TracerProvider), "tracing=True set no SDK provider"
            provider.add_span_processor(counter)
            async with (
                Worker(clients["traced"], task_queue="traced"),
                Worker(clients["plain"], task_queue="plain"),
            ):
                for name in times:  # warm up both
                    await _pipeline(clients[name], name)
                counter.ended = 0
                buffer.retrieve_updates()
                for _ in range(rounds):
                    for name in times:
                        elapsed, failures = await _pipeline(clients[name], name)
                        times[name].append(elapsed)
                        failed[name] += failures
                    buffer.retrieve_updates()
    traced, plain = (statistics.median(times[n]) for n in ("traced", "plain"))
    listening = collector_listening(otlp_endpoint())
    where = "a collector listens" if listening else "no collector listens"
    print(f"sample pipeline, {rounds} rounds, {counter.ended // rounds} spans per traced pipeline")
    print(f"  tracing=True, {describe_export()}: {where} there")
    print(f"  failed tool calls: traced {failed['traced']}, plain {failed['plain']}")
    print(f"  plain : median {plain * 1000:7.1f} ms")
    print(f"  traced: median {traced * 1000:7.1f} ms")
    print(f"  ratio traced/plain: {traced / plain:.2f}x")
    if failed["traced"] or failed["plain"]:
        raise SystemExit("tool calls failed: the ratio does not measure the same work")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    asyncio.run(main(parser.parse_args().rounds))
