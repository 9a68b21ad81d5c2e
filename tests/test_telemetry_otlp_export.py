"""``lw-temporal worker --tracing`` and ``lw-temporal run --tracing`` export over OTLP
by the standard environment variables: a run started from the CLI is one trace whose
spans reach the collector the variables name, with the service name they give."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from temporalio.testing import WorkflowEnvironment

from ._live_support import lw, worker_process


class _Collector(BaseHTTPRequestHandler):
    """Just enough of an OTLP/HTTP collector: keep each export request it receives."""

    received: list[tuple[str, bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.received.append((self.path, body))
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[str]:
    _Collector.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def _spans() -> list[tuple[str, str, bytes]]:
    """(service name, span name, trace id) of every span received."""
    found = []
    for path, body in list(_Collector.received):
        assert path == "/v1/traces"
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            service = next(
                a.value.string_value
                for a in resource_spans.resource.attributes
                if a.key == "service.name"
            )
            for scope in resource_spans.scope_spans:
                found += [(service, span.name, span.trace_id) for span in scope.spans]
    return found


async def test_cli_runs_export_one_trace_by_the_otel_variables(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str, collector: str
) -> None:
    def environ(service: str) -> dict[str, str]:
        return {
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector,
            "OTEL_SERVICE_NAME": service,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }

    async with worker_process(
        dev_env, data_dir, task_queue, "--tracing", environ=environ("lw-test-worker")
    ):
        code, out, err = await lw(
            dev_env,
            "run",
            "steady",
            "Do it.",
            "--task-queue",
            task_queue,
            "--tracing",
            environ=environ("lw-test-cli"),
        )
        assert code == 0, (out, err)
        for _ in range(100):
            names = {name for _, name, _ in _spans()}
            if {"lw.bash", "lw.worker steady"} <= names:
                break
            await asyncio.sleep(0.1)
    spans = _spans()
    assert {trace for _, _, trace in spans} == {spans[0][2]}
    by_service = {service for service, _, _ in spans}
    assert by_service == {"lw-test-worker", "lw-test-cli"}
    listed = [name for _, name, _ in spans]
    assert ("lw-test-cli", "StartWorkflow:lw.Planner", spans[0][2]) in spans
    for name in ("lw.planner steady", "lw.worker steady", "lw.model", "lw.bash"):
        assert name in listed
