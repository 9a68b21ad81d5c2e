"""What became of one sandboxed command: its exit, whether it timed out or was
stopped at a limit, and why its sandbox could not be set up when it never ran."""

from __future__ import annotations

import time
from dataclasses import dataclass

from ._output import OutputSink
from ._userns import (
    LAUNCH_FAILED_MARKER,
    LAUNCH_FAILED_STATUS,
)


@dataclass(frozen=True, slots=True)
class RunOutcome:
    exit_code: int
    timed_out: bool
    duration: float
    #: Why the sandbox could not be set up (the command never ran), else None.
    launch_failed: str | None = None
    #: What the sandbox did about a limit the command reached (stopped it at its
    #: memory or folder quota, removed what it wrote past a quota), else None.
    stopped: str | None = None
    #: The command was killed at a folder quota before it ended (as at a timeout, its
    #: memory changes are not kept).
    quota_stopped: bool = False


def _launch_failed(text: str, stdout: OutputSink, stderr: OutputSink, started: float) -> RunOutcome:
    if not text.startswith(LAUNCH_FAILED_MARKER):
        text = f"{LAUNCH_FAILED_MARKER}: {text}"
    stdout.close()
    stderr.write(f"{text}\n".encode())
    stderr.close()
    return RunOutcome(LAUNCH_FAILED_STATUS, False, time.monotonic() - started, launch_failed=text)
