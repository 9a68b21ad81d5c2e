"""Which runs are tainted: the worker-side record every activity consults.

A run is *tainted* once it has read something nobody vetted. The record lives in the
memory root's bookkeeping (``.lw/taint/runs/<tree>/``, one folder per run tree, one
file per tainted run), never in workflow state a rogue could drop: an activity asks
the book about the run ``activity.info()`` names, and the answer decides where that
run's writes go. A record is created once (first writer wins, by ``link``) and never
removed by a run, so taint only grows, survives continue-as-new (same workflow ID) and
worker restarts, and is the same on every worker of a deployment.

Taint follows the tree both ways, because both ways carry text: a child is tainted
while an ancestor is (its task came from it, and it reads the ancestor's scratch), and
a run is tainted once a descendant is (the child's summary reaches it as a tool
result). A run found tainted through a relative gets a record of its own, naming the
relative, so a later check of *its* relatives finds it. Siblings are not tainted by
each other; a parent they share is, and so is every child it starts afterwards.

A command that may get network responses leaves a mark while it runs; a mark that
outlives its command (the worker or the proxy stopped before saying what it read)
counts as taint. An untainted run pays one ``stat`` per check (its tree has no
folder; a settled mark removes a folder it leaves empty); a tainted one is
remembered by the process, since taint never goes.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from .._base import FrozenModel
from .._ids import AgentId, DataLayout, InvalidWorkflowId, parse_workflow_id

#: Where a taint came from.
Source = Literal["network", "untrusted-input", "tainted-memory", "task", "parent", "child"]

#: Lines of later taint events kept per run (the first reason is in the record).
MAX_EVENTS = 200
_TMP = ".lw-tmp-"

_tainted: dict[tuple[str, str], TaintRecord] = {}
_parsed: dict[str, TaintRecord] = {}
_seen_events: set[tuple[str, str, str, str]] = set()
_lock = threading.Lock()


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:32]


class TaintRecord(FrozenModel):
    """Why and since when a run is tainted (its first taint; later ones are events)."""

    workflow_id: str
    since: str
    source: Source
    reason: str
    #: For a taint inherited through the tree: the relative it came from.
    via: str | None = None

    def line(self) -> str:
        """``tainted since <time>: <reason>``, for people."""
        return f"tainted since {self.since}: {self.reason}"


class TaintEvent(FrozenModel):
    """A source a tainted run read after its first one (bounded per run)."""

    time: str
    source: Source
    reason: str
    #: ``store:path`` of a tainted version read (for ``memory readers --tainted``).
    read: str | None = None


class TaintBook:
    """The taint records of one data dir."""

    def __init__(self, layout: DataLayout) -> None:
        self.layout = layout
        self.root = layout.state / "taint" / "runs"

    # -- where ----------------------------------------------------------------------
    def _tree(self, agent: AgentId) -> Path:
        return self.root / _digest(agent.segments[0])

    def _record(self, agent: AgentId, workflow_id: str) -> Path:
        return self._tree(agent) / f"{_digest(workflow_id)}.json"

    def _events(self, agent: AgentId, workflow_id: str) -> Path:
        return self._tree(agent) / f"{_digest(workflow_id)}.events.jsonl"

    def _pending(self, agent: AgentId, workflow_id: str) -> Path:
        return self._tree(agent) / f"{_digest(workflow_id)}.network-pending"

    # -- a command that may read the network ------------------------------------------
    def network_begins(self, workflow_id: str) -> None:
        """A command of the run may now get network responses: until
        :meth:`network_settled` says what it read, a check that finds this mark (its
        worker stopped mid-command, the mark outlived it) counts the run tainted, so
        what the command left in the run's scratch is never taken for vetted."""
        agent = parse_workflow_id(workflow_id)
        path = self._pending(agent, workflow_id)
        # A mark already there is an earlier command's (a retried one's first attempt,
        # whose worker died): it counts now, before this command's settling removes it.
        self.status(workflow_id, relatives=False)
        record = TaintRecord(
            workflow_id=workflow_id, since=now(), source="network",
            reason="a command that could reach the network through the egress proxy "
            "ended before the proxy said what it read (its worker or the proxy stopped "
            "mid-command)",
        )  # fmt: skip
        _write_in(path, record.model_dump_json().encode())

    def network_settled(self, workflow_id: str) -> None:
        """The command's network use is known (and tainted the run if it read any). A
        tree folder left empty goes, so its untainted runs pay one ``stat`` again."""
        path = self._pending(parse_workflow_id(workflow_id), workflow_id)
        path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # a record or another command's mark is there
            os.rmdir(path.parent)

    # -- writing --------------------------------------------------------------------
    def taint(
        self,
        workflow_id: str,
        source: Source,
        reason: str,
        *,
        via: str | None = None,
        read: str | None = None,
    ) -> TaintRecord:
        """Record that ``workflow_id`` read an untrusted source. The first reason is
        the run's record; a later one is kept as an event (once per distinct source
        and reason, at most :data:`MAX_EVENTS`)."""
        agent = parse_workflow_id(workflow_id)
        reason = reason[:2000]
        existing = self.status(workflow_id, pending=False)
        first = False
        if existing is None:
            record = TaintRecord(
                workflow_id=workflow_id, since=now(), source=source, reason=reason, via=via
            )
            existing = self._create(agent, record)
            first = existing == record
        if not first or read is not None:
            event = TaintEvent(time=now(), source=source, reason=reason, read=read)
            self._event(agent, workflow_id, event)
        return existing

    def _create(self, agent: AgentId, record: TaintRecord) -> TaintRecord:
        path = self._record(agent, record.workflow_id)
        tmp = path.with_name(f"{_TMP}{os.getpid()}-{threading.get_ident()}")
        _write_in(tmp, record.model_dump_json().encode())
        try:
            os.link(tmp, path)  # the first taint wins; a record is never replaced
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)
        found = self._read(path) or record
        with _lock:
            _tainted[(str(self.layout.state), record.workflow_id)] = found
        return found

    def _event(self, agent: AgentId, workflow_id: str, event: TaintEvent) -> None:
        memo = (str(self.layout.state), workflow_id, event.source, event.read or event.reason)
        if memo in _seen_events:
            return
        path = self._events(agent, workflow_id)
        try:
            if path.stat().st_size > MAX_EVENTS * 512:
                return
        except FileNotFoundError:
            pass
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, flags, 0o600)
        try:
            os.write(fd, (event.model_dump_json() + "\n").encode())
        finally:
            os.close(fd)
        with _lock:
            _seen_events.add(memo)

    # -- reading --------------------------------------------------------------------
    def status(
        self,
        workflow_id: str,
        *,
        materialize: bool = True,
        relatives: bool = True,
        pending: bool = True,
    ) -> TaintRecord | None:
        """The run's taint, its own or through its tree (see the module docstring);
        ``None`` if it is not tainted. With ``materialize`` an inherited taint is
        recorded as the run's own (activities do; a reader such as the CLI does not);
        with ``pending`` a network mark a stopped command left counts."""
        state = str(self.layout.state)
        cached = _tainted.get((state, workflow_id))
        if cached is not None:
            return cached
        folder = _tree_folder(str(self.root), workflow_id)
        if folder is None or not os.path.isdir(folder):
            return None  # the whole cost for an untainted run: a cached name, a stat
        agent = parse_workflow_id(workflow_id)
        tree = Path(folder)
        records = list(self._tree_records(tree))
        own = next((r for r in records if r.workflow_id == workflow_id), None)
        if own is not None:
            with _lock:
                _tainted[(str(self.layout.state), workflow_id)] = own
            return own
        stopped = self._read(self._pending(agent, workflow_id)) if pending else None
        if stopped is not None:
            return self._create(agent, stopped) if materialize else stopped
        if not relatives:
            return None
        inherited = _inherited(workflow_id, records)
        if inherited is None or not materialize:
            return inherited
        return self._create(agent, inherited)

    def _tree_records(self, tree: Path) -> Iterator[TaintRecord]:
        try:
            names = sorted(os.listdir(tree))
        except FileNotFoundError:
            return
        for name in names:
            if not name.endswith(".json") or name.startswith(_TMP):
                continue
            path = tree / name
            record = _parsed.get(str(path))
            if record is None:
                record = self._read(path)
                if record is None:
                    continue
                with _lock:
                    _parsed[str(path)] = record
            yield record

    @staticmethod
    def _read(path: Path) -> TaintRecord | None:
        try:
            return TaintRecord.model_validate_json(path.read_bytes())
        except (OSError, ValueError):
            return None

    def events(self, workflow_id: str) -> list[TaintEvent]:
        """The sources a run read after its first, oldest first."""
        try:
            agent = parse_workflow_id(workflow_id)
            data = self._events(agent, workflow_id).read_bytes()
        except (InvalidWorkflowId, OSError):
            return []
        found: list[TaintEvent] = []
        for line in data.splitlines():
            try:
                found.append(TaintEvent.model_validate(json.loads(line)))
            except ValueError:
                continue
        return found

    def records(self) -> Iterator[TaintRecord]:
        """Every run's own record (inherited taints once materialized), by tree."""
        try:
            trees = sorted(os.listdir(self.root))
        except FileNotFoundError:
            return
        for tree in trees:
            yield from self._tree_records(self.root / tree)


def private_folder(folder: Path) -> None:
    """Make ``folder`` and each missing folder above it 0700 (``mkdir -p`` makes the
    ones above with the default mode, and ``.lw/taint/`` was listable where every
    other bookkeeping folder is the worker's own)."""
    missing: list[Path] = []
    while not folder.is_dir():
        missing.append(folder)
        folder = folder.parent
    for made in reversed(missing):
        with contextlib.suppress(FileExistsError):
            made.mkdir(mode=0o700)


def _write_in(path: Path, data: bytes) -> None:
    """Write ``path``, making its tree folder; again if a settling command removed
    the folder between the two (it removes only an empty one)."""
    for _ in range(5):
        private_folder(path.parent)
        try:
            path.write_bytes(data)
            return
        except FileNotFoundError:
            continue
    path.write_bytes(data)


@functools.lru_cache(maxsize=4096)
def _tree_folder(root: str, workflow_id: str) -> str | None:
    """The taint folder of ``workflow_id``'s tree (``None`` for an ID outside the
    grammar, which no activity runs under)."""
    try:
        agent = parse_workflow_id(workflow_id)
    except InvalidWorkflowId:
        return None
    return os.path.join(root, _digest(agent.segments[0]))


def _inherited(workflow_id: str, records: list[TaintRecord]) -> TaintRecord | None:
    """The taint ``workflow_id`` gets from a tainted ancestor or descendant, if any."""
    for record in records:
        other = record.workflow_id
        if workflow_id.startswith(other + "/"):
            return TaintRecord(
                workflow_id=workflow_id, since=now(), source="parent", via=other,
                reason=f"started under tainted run {other} ({record.reason})",
            )  # fmt: skip
    for record in records:
        other = record.workflow_id
        if other.startswith(workflow_id + "/"):
            return TaintRecord(
                workflow_id=workflow_id, since=now(), source="child", via=other,
                reason=f"its descendant {other} is tainted and its result reaches this run "
                f"({record.reason})",
            )  # fmt: skip
    return None
