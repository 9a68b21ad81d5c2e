"""A store's spool: mutations another process commits, and their outcomes.

Within a process, concurrent mutations of a store queue in memory and share one
journal flush (:mod:`._commit`). Across processes (workers sharing a data dir, on one
host or on several) a mutation that finds the store's lock held is written here as a
request instead, and whichever process holds the lock next commits it with its own
batch, under the same flush, and writes its outcome back; the requester, polling for
the outcome or the lock, takes it up (or, once it holds the lock itself, commits what
is left). Files in ``<state>/spool/``:

- ``<id>.out``: made by the requester before its request, later given the outcome in
  one write by the committer. The requester only ever opens a name it made itself, so
  a network file system's cache of names it looked up (an absent name is remembered
  for a while) cannot hide the outcome from it;
- ``<id>.<fp>.req``: the request (a :class:`._fileops.FileOp`, its provenance and its
  quota), written whole before the name is made, so it is whole or absent.
  ``<fp>`` fingerprints the requester's scanner: a committer takes only requests of its
  own fingerprint, so each mutation passes the scan its own process would run;
- ``<id>.<fp>.taken``: a request a committer claimed (renamed under the lock). Claims
  are answered before the lock is released, so one found by the next holder belongs
  to a committer that died first: it is committed again, and the idempotency ledger
  (every spooled mutation carries a key) makes that return what the first commit did;
- ``.<process>-<n>.spare``: a requester's files, reused from one request to the next.
  Making and removing a file costs more than all the rest of a request (0.17 to
  0.7 ms for a request's two files on ext4, against 0.03 ms to reuse them), so they are
  two spares given the request's names (a hard link for the request, a rename for the
  outcome file) and given back once its outcome is read. A reused file still holds
  its last contents, so every request and outcome is framed with its id, length and
  checksum: a reader takes only a whole frame of the id it asked for (an outcome not
  yet written, or a claim a dead committer left of a file since reused, reads as
  absent). Spares of a process gone for :data:`STALE_SECONDS` are removed.

A requester withdraws (cancelled, or out of patience) by unlinking its ``.req``; if a
committer renamed it first, the requester waits for the outcome as for a commit
already under way. Only mutations with an idempotency key and a built-in scanner are
spooled; the others wait for the lock, as before.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import uuid
import zlib
from contextlib import suppress
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Any

from temporalio.exceptions import ApplicationError

from .._definitions import MemoryQuota
from .._scan import DefaultScanner, NoScanner, Scanner
from . import _fs
from ._fileops import FileOp
from ._records import Provenance

#: Requests one lock holder takes at a time (the rest wait for the next batch).
CLAIM_LIMIT = 256
#: How long a lock holder waits for the requests it expects (see :meth:`Spool.gather`).
GATHER_SECONDS = 0.001
#: Outcomes nobody took up (their requester died) are removed after this long.
STALE_SECONDS = 3600.0
#: How often a committer looks for such leftovers while claiming.
SWEEP_EVERY = 60.0

_REQ, _TAKEN, _OUT, _SPARE = ".req", ".taken", ".out", ".spare"
_MAGIC = b"lw-spool-1"
_serial = count()
#: This process's tag in its request ids and spare files (read from the module, never
#: imported by value: a forked child draws its own, see :func:`_redraw`).
PROCESS = uuid.uuid4().hex[:8]


def _redraw() -> None:
    """A child forked after this module was imported (``multiprocessing``'s default on
    Linux) is another writer: with its parent's tag it made spare files of the same
    names as its siblings, and renamed them away under each other."""
    global PROCESS, _serial
    PROCESS = uuid.uuid4().hex[:8]
    _serial = count()


os.register_at_fork(after_in_child=_redraw)


def scanner_fingerprint(scanner: Scanner) -> str | None:
    """A stable digest of what ``scanner`` checks, the same in every process that
    configures it the same way; ``None`` for a scanner of the user's own (its
    mutations are committed by its own process, whose scanner it is)."""
    if type(scanner) is NoScanner:
        return "none"
    if type(scanner) is not DefaultScanner:
        return None
    rules = [
        [r.name, r.kind, r.blocking, r.pattern.pattern, r.pattern.flags,
         None if r.check is None else f"{r.check.__module__}.{r.check.__qualname__}"]
        for r in scanner.rules
    ]  # fmt: skip
    return hashlib.sha256(json.dumps(rules).encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Request:
    """A claimed request: what to commit, for whom, under which quota."""

    id: str
    op: FileOp
    provenance: Provenance
    quota: MemoryQuota

    @property
    def process(self) -> str:
        """The requesting process's random tag (from the id)."""
        return self.id.split("-")[1] if self.id.count("-") >= 2 else self.id


class Spool:
    """The spool of one store, as seen by a process with scanner fingerprint ``fp``."""

    def __init__(self, state: Path, fp: str) -> None:
        self.dir = state / "spool"
        #: The folder as text ending in "/": names are joined to it as strings (a
        #: request costs a dozen paths; Path objects cost more than the calls).
        self._at = f"{self.dir}/"
        self.fp = fp
        self._mutex = threading.Lock()
        self._free: list[str] = []
        #: This process's requests in flight: their (request, outcome) spares.
        self._held: dict[str, tuple[str, str]] = {}
        self._spares = count()
        #: When this process last looked for files of dead processes to sweep.
        self._swept = float("-inf")
        #: The requests the last claim could not take (left queued; see :meth:`claim`).
        self.left: set[str] = set()

    # -- the requester ------------------------------------------------------------------
    def submit(self, op: FileOp, provenance: Provenance, quota: MemoryQuota) -> str:
        """Write a request; returns its id."""
        rid = f"{time.time_ns():016x}-{PROCESS}-{next(_serial)}"
        body = {
            "op": op.as_json(),
            "provenance": {k: v for k, v in provenance if v is not None},
            "quota": dict(quota),
        }
        frame = _frame(rid, json.dumps(body, separators=(",", ":")).encode())
        request, out = self._spare(), self._spare()
        try:
            fd = os.open(self._at + request, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.pwrite(fd, frame, 0)
            finally:
                os.close(fd)
            os.rename(self._at + out, self._at + f"{rid}{_OUT}")
            try:
                os.link(self._at + request, self._at + f"{rid}.{self.fp}{_REQ}")
            except BaseException:
                os.rename(self._at + f"{rid}{_OUT}", self._at + out)
                raise
        except BaseException:
            self._give_back(request, out)
            raise
        with self._mutex:
            self._held[rid] = (request, out)
        return rid

    def _spare(self) -> str:
        """A file of this process's to hold a request or an outcome (made if none is free)."""
        with self._mutex:
            while self._free:
                name = self._free.pop()
                if os.path.exists(self._at + name):  # removed by a sweep meanwhile
                    return name
            name = f".{PROCESS}-{next(self._spares)}{_SPARE}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC
        try:
            fd = os.open(self._at + name, flags, 0o600)
        except FileNotFoundError:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._at + name, flags, 0o600)
        os.close(fd)
        return name

    def _give_back(self, *names: str) -> None:
        with self._mutex:
            self._free.extend(names)

    def _retire(self, rid: str) -> None:
        """A request is over (answered, or withdrawn before any committer took it): its
        outcome file becomes a spare again, and both spares are free."""
        with self._mutex:
            held = self._held.pop(rid, None)
        if held is None:
            return
        request, out = held
        try:
            os.rename(self._at + f"{rid}{_OUT}", self._at + out)
        except FileNotFoundError:
            self._give_back(request)
            return
        self._give_back(request, out)

    def withdraw(self, rid: str) -> bool:
        """Take a request back unless a committer has it (then wait for its outcome)."""
        try:
            os.unlink(self._at + f"{rid}.{self.fp}{_REQ}")
        except FileNotFoundError:
            return False
        self._retire(rid)
        return True

    def outcome(self, rid: str) -> dict[str, Any] | None:
        """The request's outcome once written (then its files are this process's
        spares again), else None."""
        path = self._at + f"{rid}{_OUT}"
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return {"error": {"message": f"the outcome of memory request {rid} is gone"}}
        try:
            data = _fs.read_fd(fd)
        finally:
            os.close(fd)
        body = _unframe(data, rid)
        if body is None:
            return None  # not written yet (or still being written)
        try:
            raw = json.loads(body)
        except ValueError:
            return None
        self._retire(rid)
        return raw if isinstance(raw, dict) else None

    # -- the committer (under the store's lock) ---------------------------------------------
    def gather(self, expected: int, within: float) -> None:
        """Wait (at most ``within`` seconds) until ``expected`` requests are in: the
        processes that had one in the last batch are about to send the next, and
        a batch that waits a fraction of a flush for them saves them a flush each."""
        deadline = time.monotonic() + within
        suffix = f".{self.fp}{_REQ}"
        while time.monotonic() < deadline:
            try:
                if sum(name.endswith(suffix) for name in os.listdir(self.dir)) >= expected:
                    return
            except OSError:  # gone or unusable: the claim finds out
                return
            time.sleep(within / 10)

    def waiting(self) -> bool:
        """Whether a request of this fingerprint waits for a committer (or a claim a
        dead committer left)."""
        suffixes = (f".{self.fp}{_REQ}", f".{self.fp}{_TAKEN}")
        try:
            return any(name.endswith(suffixes) for name in os.listdir(self.dir))
        except OSError:  # gone or unusable: nothing waits that could be claimed
            return False

    def claim(self) -> tuple[list[Request], list[tuple[str, Exception]]]:
        """Take every request of this fingerprint (this process's own included), and
        every claim a dead committer left: the requests, and the ids of those that
        could not be read (with why). A request that cannot be taken (its rename
        fails: a full or read-only folder, something in the way) is not a failure of
        the claim, whose requests are committed: it stays queued, its id in
        :attr:`left`, and its requester takes it back once it holds the lock (see
        :meth:`._commit.GroupCommitter.reclaim`). An ``OSError`` (the folder cannot be
        listed) means nothing was taken."""
        try:
            names = sorted(os.listdir(self.dir))
        except FileNotFoundError:
            return [], []
        taken: list[Request] = []
        broken: list[tuple[str, Exception]] = []
        suffix_req, suffix_taken = f".{self.fp}{_REQ}", f".{self.fp}{_TAKEN}"
        # Looking for leftovers costs a stat of every outcome and spare file, as much
        # as the claim itself; they are only removed after an hour, so once a minute.
        sweep = time.monotonic() - self._swept > SWEEP_EVERY
        if sweep:
            self._swept = time.monotonic()
        left = self.left = set()
        for name in names:
            if len(taken) >= CLAIM_LIMIT:
                break
            if name.endswith(suffix_req):
                rid = name[: -len(suffix_req)]
                try:
                    os.rename(self._at + name, self._at + f"{rid}{suffix_taken}")
                except FileNotFoundError:
                    continue  # withdrawn
                except OSError:
                    left.add(rid)
                    continue
            elif name.endswith(suffix_taken):
                rid = name[: -len(suffix_taken)]
                if rid in left:  # not a claim: what was in the way of this one
                    continue
            else:
                if sweep and name.endswith((_OUT, _SPARE)) and rid_is_stale(Path(self._at + name)):
                    with suppress(OSError):
                        os.unlink(self._at + name)
                continue
            try:
                request = self._read(rid)
            except (OSError, ValueError, KeyError, TypeError) as err:
                broken.append((rid, err))
                continue
            if request is None:  # a dead committer's claim of a file its requester reused
                with suppress(OSError):  # else the next committer retires it
                    self.drop(rid)
            else:
                taken.append(request)
        return taken, broken

    def _read(self, rid: str) -> Request | None:
        fd = os.open(self._at + f"{rid}.{self.fp}{_TAKEN}", os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = _fs.read_fd(fd)
        finally:
            os.close(fd)
        if not data.startswith(_MAGIC + b" " + rid.encode() + b" "):
            return None
        body = _unframe(data, rid)
        if body is None:
            raise ValueError("the request is not whole")
        raw = json.loads(body)
        return Request(
            rid,
            FileOp.from_json(raw["op"]),
            Provenance.model_validate(raw["provenance"]),
            MemoryQuota.model_validate(raw["quota"]),
        )  # validated: a request file is data, whoever wrote it

    def answer(self, rid: str, outcome: dict[str, Any]) -> None:
        """Write a claimed request's outcome into the file its requester made, and
        retire the claim (a requester that went away left no file: nothing to write)."""
        frame = _frame(rid, json.dumps(outcome, separators=(",", ":")).encode())
        try:
            fd = os.open(self._at + f"{rid}{_OUT}", os.O_WRONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            pass
        else:
            try:
                os.pwrite(fd, frame, 0)
            finally:
                os.close(fd)
        self.drop(rid)

    def drop(self, rid: str, *, outcome: bool = False) -> None:
        """Retire a claim (and, for a request answered in this process, its outcome:
        its files are this process's spares again)."""
        with suppress(FileNotFoundError):
            os.unlink(self._at + f"{rid}.{self.fp}{_TAKEN}")
        if outcome:
            self._retire(rid)


def _frame(rid: str, body: bytes) -> bytes:
    return b"%s %s %d %08x\n" % (_MAGIC, rid.encode(), len(body), zlib.crc32(body)) + body


def _unframe(data: bytes, rid: str) -> bytes | None:
    """The body framed for ``rid`` at the start of ``data``, or None unless it is
    there whole: a reused file holds its last contents until a new frame is written
    over them, and a reader may see a write half done."""
    head, sep, rest = data.partition(b"\n")
    parts = head.split(b" ")
    if not sep or len(parts) != 4 or parts[0] != _MAGIC or parts[1] != rid.encode():
        return None
    try:
        length, crc = int(parts[2]), int(parts[3], 16)
    except ValueError:
        return None
    body = rest[:length]
    return body if len(body) == length and zlib.crc32(body) == crc else None


def rid_is_stale(path: Path) -> bool:
    try:
        return time.time() - path.stat().st_mtime > STALE_SECONDS
    except FileNotFoundError:
        return False


def outcome_of(result: Any, error: BaseException | None) -> dict[str, Any]:
    """A pending mutation's outcome as the spool keeps it."""
    if error is None:
        return {"ok": result.model_dump(mode="json")}
    if isinstance(error, ApplicationError):
        return {
            "error": {
                "message": error.message,
                "type": error.type,
                "non_retryable": error.non_retryable,
            }
        }
    return {"error": {"message": f"{type(error).__name__}: {error}"}}


def error_of(raw: dict[str, Any]) -> ApplicationError:
    """The error a spooled outcome reports, raised in the process that asked."""
    return ApplicationError(
        str(raw.get("message", "the memory request failed")),
        type=raw.get("type"),
        non_retryable=bool(raw.get("non_retryable", False)),
    )
