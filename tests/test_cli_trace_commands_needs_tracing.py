"""``--trace-commands`` without ``--tracing`` stops the worker at start naming both
options: a worker that ignored it would run with no command traced while its operator
believes every command is."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ._live_support import CLI, ROOT


def test_trace_commands_alone_is_refused_at_start(tmp_path: Path) -> None:
    done = subprocess.run(
        [CLI, "worker", "--data-dir", str(tmp_path), "--definitions",
         "workflows.pipeline:DEFINITIONS", "--no-model", "--sandbox", "unsandboxed-dangerous",
         "--trace-commands", "--address", "localhost:1"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1, done.stderr
    assert "--trace-commands" in done.stderr and "add --tracing" in done.stderr
    assert "Traceback" not in done.stderr
