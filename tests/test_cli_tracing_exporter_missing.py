"""Tracing asked of an exporter whose package is not installed (OTLP over gRPC, which
the ``otel`` extra does not bring) stops the worker at start with one line naming the
package to install, not ``ImportError:`` and its traceback."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

import pytest

from ._live_support import CLI, ROOT

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("opentelemetry.exporter.otlp.proto.grpc") is not None,
    reason="the gRPC exporter is installed here",
)


def test_a_missing_grpc_exporter_is_one_line_naming_the_package(tmp_path: Path) -> None:
    done = subprocess.run(
        [CLI, "worker", "--data-dir", str(tmp_path), "--definitions",
         "workflows.pipeline:DEFINITIONS", "--no-model", "--sandbox", "unsandboxed-dangerous",
         "--tracing", "--address", "localhost:1"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("lw-temporal worker: OTLP export (grpc) needs its exporter ")
    assert "opentelemetry-exporter-otlp-proto-grpc" in done.stderr
    assert "ImportError" not in done.stderr and "Traceback" not in done.stderr
