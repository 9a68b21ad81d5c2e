"""Dreaming's bookkeeping under ``<dataDir>/.lw/dreaming/<target>/``, never mounted.

- ``cursor.json``: the runs the target's dreams have claimed (:class:`Cursor`);
- ``released/<dream>.json``: runs a timed-out dream gave back for the next one;
- ``state.json``: the consolidator's state as of the last approved dream;
- ``proposals/<dream>/``: what one dream read and proposed (``base.json``, the target's
  versions as the dream read them; ``runs.json``, the runs it consolidated;
  ``state.json``, its consolidator's state, promoted only on approval).

A claim holds ``lock`` (an ``flock``), so two dreams of one target started at once
read disjoint runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._ids import DataLayout, check_definition_id, parse_workflow_id
from ..memory._fs import write_atomic
from ._records import Cursor


class DreamBooks:
    """The bookkeeping of one target's dreams."""

    def __init__(self, layout: DataLayout, target: str) -> None:
        self.root = layout.state / "dreaming" / check_definition_id(target)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / "lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # -- the cursor and released runs ----------------------------------------------
    def cursor(self) -> Cursor:
        try:
            return Cursor.model_validate_json((self.root / "cursor.json").read_bytes())
        except FileNotFoundError:
            return Cursor()

    def save_cursor(self, cursor: Cursor) -> None:
        write_atomic(self.root / "cursor.json", cursor.model_dump_json().encode())

    def release(self, dream_id: str, runs: list[dict[str, Any]]) -> None:
        write_atomic(self._released / f"{_file_name(dream_id)}.json", json.dumps(runs).encode())

    def take_released(self) -> list[dict[str, Any]]:
        """The runs timed-out dreams gave back, removed from the pile (call locked)."""
        runs: list[dict[str, Any]] = []
        if not self._released.is_dir():
            return runs
        for path in sorted(self._released.glob("*.json")):
            with contextlib.suppress(ValueError, OSError):
                runs += json.loads(path.read_text(encoding="utf-8"))
            path.unlink(missing_ok=True)
        return runs

    @property
    def _released(self) -> Path:
        return self.root / "released"

    # -- consolidator state ------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        state = _read_json(self.root / "state.json", {})
        return state if isinstance(state, dict) else {}

    def adopt_state(self, dream_id: str) -> None:
        """Make the approved dream's consolidator state the target's."""
        proposed = self.proposal(dream_id) / "state.json"
        if proposed.exists():
            write_atomic(self.root / "state.json", proposed.read_bytes())

    # -- proposals ---------------------------------------------------------------------
    def proposal(self, dream_id: str) -> Path:
        return self.root / "proposals" / _file_name(dream_id)

    def write(self, dream_id: str, name: str, value: object) -> None:
        write_atomic(self.proposal(dream_id) / name, json.dumps(value).encode())

    def read(self, dream_id: str, name: str, default: Any) -> Any:
        return _read_json(self.proposal(dream_id) / name, default)


def _file_name(dream_id: str) -> str:
    """A dream ID as one file name (the ID grammar keeps it one path segment)."""
    run = parse_workflow_id(dream_id)
    assert len(run.segments) == 1
    return run.segments[0]


def _read_json(path: Path, default: Any) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return default
    except ValueError:
        # A damaged bookkeeping file is set aside, not trusted and not fatal.
        os.replace(path, path.with_name(f"{path.name}.damaged"))
        return default
