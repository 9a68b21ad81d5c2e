"""The seeds' listing rule: ``find``, ``ls -R``, ``grep -r`` and the like show no path
outside the roots.

A line is held against the roots when it starts with a path (``/x``, ``./x``,
``../x``, ``x:`` headers of ``ls -R`` and ``x:12:match`` lines of ``grep``, ``du``'s
last field). An absolute one needs no more; a relative one is resolved against the
folder the listing ran in, when the pre-check could follow it there
(:class:`~._walk.Walk`), and is kept as it is when not: the kernel has already made
sure nothing outside the roots could be listed, so a line is never dropped on a guess.
What is withheld is counted, so the result can say so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from .._scope import Scope
from ._canon import Deadline, OverBudget, classify
from ._walk import Walk

#: The line that ends a listing whose filter ran out of time (the rest is dropped).
LISTING_CUT = "lw.bash: listing cut here: filtering it took too long; list less at once\n"


@dataclass(frozen=True, slots=True)
class Listing:
    """A filtered listing: the lines kept, how many were withheld, and whether the
    filter ran out of time (every line after that point withheld too)."""

    text: str
    withheld: int = 0
    cut: bool = False

    def note(self) -> str | None:
        """The line that tells the agent what was withheld, if anything was."""
        if not self.withheld:
            return None
        lines = "line" if self.withheld == 1 else "lines"
        why = (
            "the filter ran out of time"
            if self.cut
            else "they name paths outside the allowed roots"
        )
        return f"{self.withheld} {lines} of the listing withheld: {why}"


def _listed_path(line: str) -> str | None:
    """The path one output line of find/ls -R/grep -r/tree/du names, if any:
    ``path:`` headers and ``path:match`` lines name their head, ``du`` its last field."""
    stripped = line.strip()
    if not stripped:
        return None
    if "\t" in stripped:
        stripped = stripped.split("\t")[-1]
    head = stripped.split(":", 1)[0]
    if head.startswith(("/", "./", "../")) or head in (".", ".."):
        return head
    return None


def withhold_outside(
    scope: Scope,
    text: str,
    cwd: PurePosixPath | None,
    *,
    budget: float,
) -> Listing:
    """``text`` without the lines that name a path outside the roots; relative lines
    are judged against ``cwd``, and kept when it is None (unknown).

    Past ``budget`` seconds the remaining lines are withheld, not shown unfiltered."""
    walk = Walk.start(scope, Deadline(budget))
    kept: list[str] = []
    withheld = 0
    lines = text.splitlines(keepends=True)
    try:
        for index, line in enumerate(lines):
            candidate = _listed_path(line)
            if candidate is not None and (candidate.startswith("/") or cwd is not None):
                absolute = candidate if cwd is None else str(cwd / candidate)
                canonical = walk.canonicalize(absolute)
                if canonical is None or classify(scope, canonical) is None:
                    withheld += 1
                    continue
            kept.append(line)
            if walk.deadline is not None and not index % 256:
                walk.deadline.check()
    except OverBudget:
        withheld += len(lines) - len(kept) - withheld
        kept.append(LISTING_CUT)
        return Listing("".join(kept), withheld, cut=True)
    return Listing("".join(kept), withheld)
