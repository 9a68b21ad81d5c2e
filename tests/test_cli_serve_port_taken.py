"""``lw-temporal ui`` and ``lw-temporal codec-server`` given a ``--listen`` port that is
taken, or a ``--data-dir`` that is no folder, stop with one line naming the fix and
exit status 2, as ``worker`` does for a taken ``--metrics-port``: before, a taken port
was ``ui failed: OSError: [Errno 98] Address already in use``, naming no flag."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from ._live_support import CLI, ROOT, address


@pytest.fixture
def taken() -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )


def _one_line(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    for text in expected:
        assert text in done.stderr, (text, done.stderr)


def test_a_taken_port_names_listen(
    dev_env: WorkflowEnvironment, tmp_path: Path, taken: str
) -> None:
    at = ("--address", address(dev_env))
    _one_line(
        _run("ui", "--data-dir", str(tmp_path), "--listen", taken, *at),
        f"cannot listen on {taken}",
        "in use",
        "--listen",
    )
    _one_line(
        _run("codec-server", "--data-dir", str(tmp_path), "--listen", taken),
        f"cannot listen on {taken}",
        "in use",
        "--listen",
    )


def test_a_missing_data_dir_is_a_usage_mistake(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing")
    _one_line(_run("ui", "--data-dir", missing), f"--data-dir {missing} is not a folder")
    _one_line(
        _run("codec-server", "--data-dir", missing, "--listen", "127.0.0.1:0"),
        f"--data-dir {missing} is not a folder",
    )
