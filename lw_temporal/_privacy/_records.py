"""What ``forget`` and the reach of ``memory redact`` report: pure data."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .._base import FrozenModel

#: The audit log of erasures, on the memory root: ``.lw/audit/forget.jsonl``.
FORGET_AUDIT = "forget.jsonl"
#: How many places a report lists; the counts say how many there were.
MAX_LISTED = 200

MemoryMode = Literal["keep", "revert"]


class Place(FrozenModel):
    """One place: a file or folder under the data dir (``path`` relative to the root
    it is under), what it is, and what happened to it or what to do about it."""

    what: str
    path: str
    files: int = 0
    bytes: int = 0
    note: str = ""

    def line(self) -> str:
        size = f" ({self.files} files, {self.bytes} bytes)" if self.files else ""
        note = f": {self.note}" if self.note else ""
        return f"{self.what} {self.path}{size}{note}"


class ForgetReport(FrozenModel):
    """What ``forget`` erased of one run tree, and what it could not."""

    tree: str
    by: str
    why: str
    time: str
    #: The tree's workflow executions Temporal knows (capped at ``MAX_LISTED``).
    runs: tuple[str, ...] = ()
    runs_count: int = 0
    terminated: tuple[str, ...] = ()
    key_shredded: bool = False
    #: The key was shredded by an earlier ``forget`` of the same tree.
    already_forgotten: bool = False
    memory: MemoryMode = "keep"
    removed: tuple[Place, ...] = ()
    remaining: tuple[Place, ...] = ()
    removed_count: int = 0
    remaining_count: int = 0


class ReachReport(FrozenModel):
    """Where a redacted pattern was found outside the redacted file: each place
    scrubbed, and each place it stays (with what erases it)."""

    changed: tuple[Place, ...] = ()
    remaining: tuple[Place, ...] = ()
    changed_count: int = 0
    remaining_count: int = 0
    #: Run trees whose Temporal histories may hold the text (``forget`` erases them).
    trees: tuple[str, ...] = Field(default_factory=tuple)
