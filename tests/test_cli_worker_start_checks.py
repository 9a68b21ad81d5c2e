"""``lw-temporal worker`` checks everything at start: a setting that cannot work stops it
before it polls with exit status 2 and one line naming the problem and the fix (never
``ready:``, never a traceback). Once running, it always ends: a plugin whose start fails
inside exits 1 saying why, and SIGTERM stops it within ``--stop-timeout`` even when what
runs inside never returns."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from lw_temporal._cli._demo_run import _free_port
from lw_temporal.testing import temporal_cli_path

from ._live_support import CLI, ROOT, address

SAMPLE = ("--definitions", "workflows.pipeline:DEFINITIONS")
MODEL = ("--model", "workflows.pipeline:sample_model")
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mounts, chown, uid 64000)")


async def _worker(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        CLI, "worker", *args, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def _one_line(code: int, out: str, err: str, *expected: str, status: int = 2) -> None:
    assert code == status, (out, err)
    assert "ready:" not in out and "Traceback" not in err, (out, err)
    assert len(err.strip().splitlines()) == 1, err
    for text in expected:
        assert text in err, (text, err)


@pytest_asyncio.fixture
async def bare_server() -> AsyncIterator[WorkflowEnvironment]:
    """A dev server without lw's search attributes."""
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_cli_path(), dev_server_log_level="error"
    )
    try:
        yield env
    finally:
        await env.shutdown()


async def test_settings_that_cannot_work_stop_the_worker_with_one_line(
    dev_env: WorkflowEnvironment, tmp_path: Path, bare_server: WorkflowEnvironment
) -> None:
    at = ("--address", address(dev_env))
    data = tmp_path / "data"
    data.mkdir()
    ok = ("--data-dir", str(data), *SAMPLE, *MODEL, *at)

    missing = tmp_path / "missing"
    _one_line(*await _worker("--data-dir", str(missing), *SAMPLE, *MODEL, *at),
              "does not exist", f"mkdir -p {missing}", "--create")  # fmt: skip
    assert not missing.exists()
    a_file = tmp_path / "file"
    a_file.write_text("x")
    _one_line(*await _worker("--data-dir", str(a_file), *SAMPLE, *MODEL, *at), "not a folder")
    _one_line(*await _worker(*ok, "--sandbox", "bogus"), "--sandbox", "invalid choice", "bwrap")
    _one_line(
        *await _worker("--data-dir", str(data), *SAMPLE, *at),
        "no --model",
        "workflows.pipeline:sample_model",
        "--no-model",
    )
    _one_line(
        *await _worker("--data-dir", str(data), "--definitions", "workflows.pipeline:NOPE", *at),
        "has no attribute 'NOPE'",
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        _one_line(
            *await _worker(*ok, "--metrics-port", port, "--metrics-host", "127.0.0.1"),
            f"127.0.0.1:{port}",
            "in use",
            "--metrics-port",
        )
    nowhere = f"127.0.0.1:{_free_port()}"
    _one_line(
        *await _worker("--data-dir", str(data), *SAMPLE, *MODEL, "--address", nowhere),
        f"cannot reach a Temporal server at {nowhere}",
        "temporal server start-dev",
    )
    _one_line(*await _worker(*ok, "--namespace", "nowhere"), "namespace 'nowhere' does not exist")
    _one_line(
        *await _worker(
            "--data-dir", str(data), *SAMPLE, *MODEL, "--address", address(bare_server),
            "--search-attributes",
        ),
        "no Keyword search attribute LwRole or LwDefinition",
        "temporal operator search-attribute create",
        "leave out --search-attributes",
    )  # fmt: skip


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A folder on a read-only mount (a bind of an empty one)."""
    source, folder = tmp_path / "source", tmp_path / "read-only"
    source.mkdir()
    folder.mkdir()
    subprocess.run(["mount", "--bind", str(source), str(folder)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True)
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


@ROOT_ONLY
async def test_data_dirs_a_root_worker_cannot_serve_stop_it(
    dev_env: WorkflowEnvironment, tmp_path: Path, read_only: Path
) -> None:
    at = ("--address", address(dev_env))
    _one_line(
        *await _worker("--data-dir", str(read_only), *SAMPLE, *MODEL, *at),
        "read-only file system",
        "mount it read-write",
    )

    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, 12345, 12345)
    _one_line(
        *await _worker("--data-dir", str(theirs), *SAMPLE, *MODEL, *at),
        "owned by uid 12345",
        "chown 0",
    )

    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    (closed / "data").mkdir()
    _one_line(
        *await _worker("--data-dir", str(closed / "data"), *SAMPLE, *MODEL, *at),
        "cannot reach the data dir",
        f"{closed} is mode 700",
    )


async def test_a_worker_whose_start_fails_inside_still_ends(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    base = (
        "--data-dir", str(tmp_path), "--definitions", "tests._worker_fault_support:DEFINITIONS",
        *MODEL, "--address", address(dev_env), "--stop-timeout", "2s",
    )  # fmt: skip
    code, out, err = await _worker(*base, env={"LW_TEST_FAULT": "raise"})
    _one_line(code, out, err, "stopped serving", "Read-only file system", status=1)

    process = await asyncio.create_subprocess_exec(
        CLI, "worker", *base, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "LW_TEST_FAULT": "hang"},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 120)
    assert line == b"lw-test: the plugin's start hangs\n"
    process.send_signal(signal.SIGTERM)
    out_bytes, err_bytes = await asyncio.wait_for(process.communicate(), 30)
    _one_line(
        process.returncode or 0,
        out_bytes.decode().replace("lw-temporal worker: stopped\n", ""),
        err_bytes.decode(),
        "did not stop within 0:00:02",
        status=1,
    )
