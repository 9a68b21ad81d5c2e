"""``lw.bash``'s request and result: what an agent asks to run and what it gets back,
bounded for a workflow history (DESIGN section 7 names ``command``, ``timeout_seconds``,
``exit_code``, ``stdout``, ``stderr`` and ``rejection``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ._base import FrozenModel
from ._egress._use import NetworkUse

#: The longest command timeout a request may name.
MAX_TIMEOUT_SECONDS = 365 * 24 * 3600.0


class BashRequest(FrozenModel):
    """The ``lw.bash`` activity's input: one command line for the agent's sandboxed
    shell; the agent's view of memory and scratch follows from the workflow ID alone."""

    #: No length bound here: a request that failed to decode would be retried; the
    #: pre-check refuses one over ``MAX_COMMAND_BYTES`` with a readable reason instead.
    command: str
    #: Bounded (a year; a worker caps it at its own ``max_timeout`` anyway): a caller
    #: schedules the activity with this timeout, and ``1e300`` overflowed that
    #: timedelta in the calling workflow's task.
    timeout_seconds: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_SECONDS)


class MemoryChange(FrozenModel):
    #: The virtual path the agent used, e.g. ``/mnt/memory/workflow/lessons.md``.
    path: str
    kind: Literal["write", "delete", "mkdir"]
    store: str


class BashResult(FrozenModel):
    """What one command did, bounded for the history: outputs beyond the cap are in
    files the agent can read (``*_ref``), memory changes are listed with a count, and
    ``rejection`` says why a command was refused before it ran (exit code
    ``REJECTED_EXIT_CODE``)."""

    exit_code: int
    stdout: str
    stderr: str
    rejection: str | None = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    #: Virtual paths (under /mnt/scratch/own/) of the full outputs, set when truncated.
    stdout_ref: str | None = None
    stderr_ref: str | None = None
    duration_seconds: float = 0.0
    timed_out: bool = False
    #: The first :data:`MAX_LISTED_CHANGES` memory changes kept; the count is of all.
    memory_changes: tuple[MemoryChange, ...] = ()
    memory_changes_count: int = 0
    #: Memory changes that were not kept, each ``<virtual path>: <reason>`` (capped
    #: the same way).
    memory_refused: tuple[str, ...] = ()
    memory_refused_count: int = 0
    sandbox: str = ""
    #: What the sandbox did about a limit the command reached, else None: stopped it
    #: at its scratch or ``TMPDIR`` quota (its memory changes are not kept), a process
    #: killed at the memory limit of all its processes, what it wrote past its scratch
    #: quota removed. Also the last line of ``stderr``.
    stopped: str | None = None
    #: Lines of a recursive listing left out of ``stdout`` because they name a path
    #: outside the allowed roots (``stderr`` says so too).
    listing_withheld: int = 0
    #: Why the command may have failed where the bwrap sandbox would have let it work
    #: (a documented gap of the backend it ran on), else None; also a ``stderr`` line.
    hint: str | None = None
    #: For an agent with a network policy: what the command did through the egress
    #: proxy (refusals are also named at the end of ``stderr``); else None.
    network: NetworkUse | None = None
