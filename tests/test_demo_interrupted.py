"""A ctrl-C while ``lw-temporal demo`` runs its pipeline ends it at once: one line, exit
status 130, and its dev server gone. A terminal's ctrl-C reaches the whole process group,
the embedded dev server too; the demo's worker, left to shut down as usual, then retried
its calls to the gone server for seconds (a screen of the SDK's retry warnings) before
the demo ended.

The interrupt is what a terminal sends: SIGINT to the demo's process group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with open(task / "children", encoding="ascii") as listing:
            found += [int(child) for child in listing.read().split()]
    return found


def test_ctrl_c_during_the_pipeline_ends_the_demo_at_once(tmp_path: Path) -> None:
    demo = subprocess.Popen(
        [sys.executable, "-m", "lw_temporal._cli", "demo", "--data-dir", str(tmp_path / "d")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    try:
        assert demo.stdout is not None
        # Until the pipeline runs a command or waits for its children's (activities in
        # flight): the progress is polled, so a state as short as one command may never
        # be printed, and the first one printed is either.
        for line in demo.stdout:
            if "running tools (bash)" in line or "waiting for children" in line:
                break
        else:
            raise AssertionError(f"the demo ended first: {demo.communicate()}")
        server = _children(demo.pid)
        assert server, "the dev server runs as the demo's child"
        interrupted = time.monotonic()
        os.killpg(demo.pid, signal.SIGINT)
        _, err = demo.communicate(timeout=60)
        took = time.monotonic() - interrupted
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()
    assert demo.returncode == 130, err
    assert took < 5, (took, err)
    assert "Traceback" not in err, err
    assert "retried" not in err, err  # no calls retried against the gone server
    assert err.rstrip().splitlines()[-1] == "lw-temporal demo: interrupted", err
    for pid in server:
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid), pid


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True
