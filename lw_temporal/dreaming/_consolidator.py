"""The consolidator protocol and the deterministic, model-free default."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ._records import MAX_COMMAND, RunRecord


@dataclass(frozen=True)
class Note:
    """A consolidator's output: a file for the target's store, by relative path."""

    path: str
    content: str


@dataclass(frozen=True)
class DreamContext:
    """What a consolidator knows besides the runs: the target definition id, the dream's
    workflow ID, the target store's current files and the state it kept last time."""

    target: str
    workflow_id: str
    #: The target store's text files (relative path -> content), bounded in size.
    memory: Mapping[str, str] = field(default_factory=dict)
    #: What the consolidator kept from the target's last approved dream (its
    #: ``Consolidation.state``); empty before the first approval.
    state: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Consolidation:
    """Notes for the target's store, and the bookkeeping to carry to the next dream.

    ``state`` is kept in the data dir's ``.lw/`` beside the proposal and becomes the
    next dream's ``DreamContext.state`` only if a reviewer approves: counts never sit
    in a note that every future planner reads.
    """

    notes: list[Note]
    state: dict[str, Any] = field(default_factory=dict)


class Consolidator(Protocol):
    """Turns the records of many runs plus the target's memory into notes.

    ``runs`` is an iterator streamed from disk: a consolidator that keeps only
    aggregates costs memory in proportion to what it learns, not to the number of runs.
    It runs in a worker thread and must be deterministic if dreams are to be
    reproducible. It may return plain notes, or a :class:`Consolidation` to carry state.
    """

    def consolidate(
        self, context: DreamContext, runs: Iterator[RunRecord]
    ) -> list[Note] | Consolidation: ...


# -- the default consolidator ----------------------------------------------------------------

_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_SPACE = re.compile(r"\s+")


def _normalize(line: str) -> str:
    return _SPACE.sub(" ", _BULLET.sub("", line)).strip()


def _runs(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"


def _oneline(text: str, limit: int) -> str:
    text = _SPACE.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _command_line(command: str) -> str:
    """A command as a note shows it: its first line (a heredoc's body is the data it
    wrote, not the command), marked when more followed."""
    lines = command.strip().splitlines() or [""]
    first = _oneline(lines[0], MAX_COMMAND)
    return f"{first} …" if len(lines) > 1 else first


class _Tally:
    """Counts of distinct runs per key, with the first-seen display form."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.shown: dict[str, str] = {}

    def add(self, key: str, shown: str, count: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + count
        self.shown.setdefault(key, shown)

    def top(self, limit: int, minimum: int = 1) -> list[tuple[str, int]]:
        items = [(k, c) for k, c in self.counts.items() if c >= minimum]
        items.sort(key=lambda kc: (-kc[1], kc[0]))
        return [(self.shown[k], c) for k, c in items[:limit]]

    def dump(self, limit: int) -> list[list[object]]:
        items = sorted(self.counts.items(), key=lambda kc: (-kc[1], kc[0]))[:limit]
        return [[k, self.shown[k], c] for k, c in items]

    def load(self, rows: object) -> None:
        if not isinstance(rows, list):
            return
        for row in rows:
            if (
                isinstance(row, list)
                and len(row) == 3
                and isinstance(row[0], str)
                and isinstance(row[1], str)
                and isinstance(row[2], int)
            ):
                self.add(row[0], row[1], row[2])


class DefaultConsolidator:
    """Deterministic notes: de-duplicated lessons, recurring failures with counts, and
    commands that worked, each counted in runs.

    Lessons are the lines the runs wrote into the target's workflow memory. The note
    is cumulative: its tallies travel as the consolidation's ``state`` (kept in
    ``.lw/``), and a dream adds its runs to the tallies of the last approved dream.
    """

    NOTE_PATH = "dreaming/consolidated.md"

    def __init__(self, *, min_failure_runs: int = 2, shown: int = 50, kept: int = 500) -> None:
        self.min_failure_runs = min_failure_runs
        self.shown = shown
        self.kept = kept

    def consolidate(self, context: DreamContext, runs: Iterator[RunRecord]) -> Consolidation:
        lessons, failures, worked = _Tally(), _Tally(), _Tally()
        state = context.state
        total = state.get("runs", 0) if isinstance(state.get("runs"), int) else 0
        lessons.load(state.get("lessons"))
        failures.load(state.get("failures"))
        worked.load(state.get("worked"))
        new_runs = 0
        for run in runs:
            new_runs += 1
            seen_lessons: dict[str, str] = {}
            seen_failures: dict[str, str] = {}
            seen_worked: dict[str, str] = {}
            for op in run.memory_ops:
                if op.content is None or op.op in ("read", "list", "delete"):
                    continue
                if op.store is not None and op.store != "workflow":
                    continue
                for line in op.content.splitlines():
                    text = _normalize(line)
                    if len(text) < 3 or text.startswith("#") or text.startswith("<!--"):
                        continue
                    seen_lessons.setdefault(text.casefold(), text)
            for cmd in run.commands:
                command = _command_line(cmd.command)
                if cmd.rejection:
                    shown = f"`{command}` was refused: {_oneline(cmd.rejection, 160)}"
                    seen_failures.setdefault(f"refused\0{command}", shown)
                elif cmd.exit_code == 0:
                    seen_worked.setdefault(command, f"`{command}`")
                elif cmd.exit_code is not None:
                    shown = f"`{command}` exited {cmd.exit_code}"
                    seen_failures.setdefault(f"exit\0{command}\0{cmd.exit_code}", shown)
            for failure in run.failures:
                message = _oneline(failure.message, 200)
                seen_failures.setdefault(
                    f"{failure.source}\0{message}", f"{failure.source} failed: {message}"
                )
            for key, shown in seen_lessons.items():
                lessons.add(key, shown)
            for key, shown in seen_failures.items():
                failures.add(key, shown)
            for key, shown in seen_worked.items():
                worked.add(key, shown)
        total += new_runs
        kept = {
            "runs": total,
            "lessons": lessons.dump(self.kept),
            "failures": failures.dump(self.kept),
            "worked": worked.dump(self.kept),
        }
        lines = [
            f"# Dreaming notes for {context.target}",
            "",
            f"Consolidated from {total} finished runs ({new_runs} new in "
            f"{context.workflow_id}). Counts are numbers of runs.",
            "",
            "## Lessons",
            "",
        ]
        lines += [
            f"- {text}" + (f" ({n} runs)" if n > 1 else "") for text, n in lessons.top(self.shown)
        ] or ["- (none recorded)"]
        lines += ["", "## Recurring failures", ""]
        lines += [
            f"- {_runs(n)}: {text}" for text, n in failures.top(self.shown, self.min_failure_runs)
        ] or ["- (none)"]
        lines += ["", "## Commands that worked", ""]
        lines += [f"- {_runs(n)}: {text}" for text, n in worked.top(self.shown)] or ["- (none)"]
        return Consolidation([Note(self.NOTE_PATH, "\n".join(lines) + "\n")], kept)
