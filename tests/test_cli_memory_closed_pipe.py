"""The memory verbs stop quietly when their reader closes the pipe (README: every
command "stops quietly when its reader closes the pipe"): their handlers turn an
``OSError`` into a one-line failure, and a closed pipe is one, so ``memory audit ... |
head -n 1`` printed "memory audit failed: BrokenPipeError" and exited 1."""

from __future__ import annotations

import subprocess
from pathlib import Path

from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef

from ._live_support import CLI, ROOT


def test_a_closed_pipe_ends_memory_audit_with_the_sigpipe_status(tmp_path: Path) -> None:
    stores = MemoryStores(DataLayout.at(tmp_path))
    store = StoreRef(StoreKind.WORKFLOW, "cr")
    who = Provenance(actor="ops")
    stores.write(store, "notes.md", b"first\n", provenance=who)
    for n in range(2000):  # about 170 KiB of audit lines: far past a pipe buffer (64 KiB)
        stores.append(store, "notes.md", f"line {n}\n".encode(), provenance=who)
    done = subprocess.run(
        f"{CLI} memory audit --data-dir {tmp_path} workflow:cr | head -n 1 >/dev/null; "
        'echo "status=${PIPESTATUS[0]}"',
        shell=True, executable="/bin/bash", cwd=ROOT, capture_output=True, timeout=120,
    )  # fmt: skip
    # the output is far more than the pipe and ``head`` take before it closes, so the
    # writer meets the closed pipe (300 lines did not always: then it exited 0)
    assert (done.stdout, done.stderr) == (b"status=141\n", b""), done
