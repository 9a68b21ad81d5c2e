"""``lw-temporal demo | head`` ends quietly: the reader closing the pipe stops the
printing, not the demo. The embedded dev server wrote its banner to the same pipe and
died of the closed pipe mid-pipeline, so the demo printed a screen of tracebacks, exited 1
and could leave its workflows half done. Now the server's stdout is ``/dev/null`` (the
demo prints its addresses itself), the pipeline and the server end as they would, and
the demo exits with the closed-pipe status (141, as a shell's ``SIGPIPE``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.test_demo_interrupted import _children, _zombie


def test_a_closed_pipe_ends_the_demo_quietly(tmp_path: Path) -> None:
    demo = subprocess.Popen(
        [sys.executable, "-m", "lw_temporal._cli", "demo", "--data-dir", str(tmp_path / "d")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert demo.stdout is not None
        first = [demo.stdout.readline() for _ in range(4)]
        server = _children(demo.pid)  # the dev server runs by now (its UI line was printed)
        demo.stdout.close()  # as `| head -4` does
        _, err = demo.communicate(timeout=240)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    assert demo.returncode == 141, err
    assert err == "", err
    assert server, "the dev server runs as the demo's child"
    for pid in server:
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid), pid
    # the pipeline ran to its end: every step's scratch was written
    scratch = sorted(p.name for p in (tmp_path / "d" / "runs").rglob("findings.md"))
    assert len(scratch) == 3, scratch
    assert any(line.startswith("Temporal server: ") for line in first), first
