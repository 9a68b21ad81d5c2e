"""A CLI worker that stops undoes what its sandbox set up: its staging root on
``/dev/shm`` (the README: "a private folder there, removed when the worker exits"),
its cgroups' parents, its mounts.

The command line ends with ``os._exit`` (the SDK's native threads can crash the
interpreter's teardown), which runs no ``atexit`` handler, so every ``lw-temporal
worker`` that stopped cleanly left its staging root (and, as root, its cgroup
folders) for the next worker's sweep. Now the sandbox's exit handlers run before it;
an ordinary interpreter exit runs each of them once, as before."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

_STAGING_THEN_EXIT = """
import sys
from pathlib import Path
from lw_temporal._cli._common import exit_now
from lw_temporal._sandbox import _overlay
root = _overlay._shm_root(Path(sys.argv[1]), None, "vm-exit-test")
print(root or "", flush=True)
exit_now(0)
"""

_HANDLER_ONCE = """
import sys
from lw_temporal._sandbox._exits import at_exit, run_exit_handlers
def mark(path):
    with open(path, "a") as out:
        out.write("ran\\n")
at_exit(mark, sys.argv[1])
at_exit(mark, sys.argv[2])
if sys.argv[3] == "now":
    run_exit_handlers()
"""


def _python(code: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_exit_now_removes_the_staging_root(tmp_path: Path) -> None:
    shown = _python(_STAGING_THEN_EXIT, str(tmp_path))
    if not shown:
        pytest.skip("no tmpfs /dev/shm with 1 GiB free here: staging stays in the data dir")
    root = Path(shown)
    assert root.name.startswith("lw-staging-vm-exit-test.")
    assert not root.exists(), f"{root} left after exit_now"


@pytest.mark.parametrize("how", ["now", "atexit"])
def test_each_handler_runs_once(tmp_path: Path, how: str) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    _python(_HANDLER_ONCE, str(first), str(second), how)
    assert first.read_text() == "ran\n" and second.read_text() == "ran\n"
