"""Every code block of the README runs as written, in the README's order, the way a new
user runs them: the dev server and the worker of "Try it on a dev server" in the
background, then each block in turn (``sh`` with ``bash -e``, ``python`` with the
interpreter), each exiting 0 without a traceback.

What the test changes, and only that: the data dir ``/var/lib/lw`` becomes a temporary
folder; the dev server gets free ports (``--port``, ``--ui-port``) instead of 7233/8233
and the CLI finds it through ``TEMPORAL_ADDRESS`` (the Python block's
``localhost:7233`` is replaced the same way); ``.venv/bin/`` is this interpreter's
folder. Not run here: the two commands of "Two commands" (CI runs ``make test``;
``test_demo_cli`` runs the demo), the two-line model switch (a patch to the worker
block, run by ``test_readme_model_switch``) and ``text`` blocks (output examples).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lw_temporal._cli._demo_run import _free_port

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
BIN = Path(sys.executable).parent


def _blocks() -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in re.finditer(r"```(\w*)\n(.*?)```", README, re.S)]


def _runnable() -> list[tuple[str, str]]:
    return [
        (kind, body)
        for kind, body in _blocks()
        if kind in ("sh", "python")
        and not body.startswith("make demo")
        and "# instead of:" not in body
    ]


def _as_here(body: str, data_dir: Path, address: str) -> str:
    return (
        body.replace("/var/lib/lw", str(data_dir))
        .replace(".venv/bin/", f"{BIN}/")
        .replace("localhost:7233", address)
    )


@pytest.fixture
def environ(tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", "HOME": str(tmp_path)}
    env.pop("TEMPORAL_NAMESPACE", None)
    yield env


def _wait_for(process: subprocess.Popen[str], text: str, seconds: float) -> list[str]:
    """Read ``process``'s output until a line holds ``text``; then keep reading it in a
    thread (a full pipe would stop the process), into the list returned."""
    assert process.stdout is not None
    stdout = process.stdout
    seen: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        line = stdout.readline()
        if not line:
            break
        seen.append(line)
        if text in line:
            threading.Thread(target=lambda: seen.extend(stdout), daemon=True).start()
            return seen
    raise AssertionError(f"no {text!r} within {seconds}s:\n{''.join(seen)}")


def test_every_readme_block_runs_as_written(tmp_path: Path, environ: dict[str, str]) -> None:
    blocks = _runnable()
    server_block = next(b for k, b in blocks if "temporal server start-dev" in b)
    worker_block = next(b for k, b in blocks if "lw-temporal worker" in b)
    assert blocks.index(("sh", server_block)) < blocks.index(("sh", worker_block))
    data_dir = tmp_path / "lw"
    port, ui_port = _free_port(), _free_port()
    address = f"localhost:{port}"
    environ["TEMPORAL_ADDRESS"] = address
    background: list[subprocess.Popen[str]] = []
    logs: list[list[str]] = []

    def start(body: str, ready: str, *extra: str) -> None:
        command = _as_here(body, data_dir, address).rstrip() + " " + " ".join(extra)
        process = subprocess.Popen(
            ["bash", "-ec", f"exec {command}"],
            cwd=ROOT,
            env=environ,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        background.append(process)
        logs.append(_wait_for(process, ready, 90))

    try:
        for kind, body in blocks:
            if body is server_block:
                start(body, "Temporal Server:", "--port", str(port), "--ui-port", str(ui_port))
                continue
            if body is worker_block:
                start(body, "ready:")
                continue
            code = _as_here(body, data_dir, address)
            argv = [sys.executable, "-c", code] if kind == "python" else ["bash", "-ec", code]
            done = subprocess.run(
                argv, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=300
            )
            assert done.returncode == 0, (body, done.stdout, done.stderr, "".join(logs[-1]))
            assert "Traceback" not in done.stderr, (body, done.stderr)
    finally:
        for process in reversed(background):
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
