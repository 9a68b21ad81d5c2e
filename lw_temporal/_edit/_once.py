"""Exactly once for the text editor's scratch edits under an activity retry.

Memory edits are made once by the store's ledger. A scratch file has no store: a
worker that died after an ``insert`` reached the file but before the activity
completed had its retry insert the text again, and a ``str_replace`` retried that way
failed (``old_str`` was gone) for an edit that had been made. So before a scratch
write lands, the worker notes the content it is about to put there, keyed by the
calling activity and the path, in the agent's conversation bookkeeping (never in its
view: no mount shows it; retention and ``forget`` remove it with the conversation).
A later attempt of the same activity that finds the note and the file holding exactly
that content knows its edit is made; a note without its content (the worker died before
the file was replaced, or the file changed since) is redone. A note's name and content
are digests: no path or text of the agent's.

A note also records the attempt that wrote it, and an attempt writes only under its
note's lock, after checking it: an attempt that was paused (a stopped or stuck worker)
and goes on after a later attempt of its call noted its own edit is superseded
(:class:`Superseded`) and writes nothing, where it wrote what it had computed from the
file as it first read it over whatever changed since, or made the edit a second time.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .._locks import lock_exclusive
from ..memory._records import Provenance
from ._paths import Place, ToolError

#: The agent's notes, beside its conversations' folders.
FOLDER = "edits"
#: How long an attempt waits for another attempt of its call writing the same file.
LOCK_SECONDS = 30.0


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Superseded(Exception):
    """A later attempt of this call noted its edit of the file: this one writes nothing."""

    def __init__(self, attempt: int, late: int, shown: str) -> None:
        super().__init__(
            f"The file {shown} has been edited by a later attempt (attempt {attempt}) of "
            f"this call; this one (attempt {late}) was superseded and wrote nothing."
        )
        self.attempt = attempt


class ScratchOnce:
    """The notes of one agent (``books``: its conversation bookkeeping folder)."""

    def __init__(self, books: Path, provenance: Provenance) -> None:
        self.folder = books / FOLDER
        key = provenance.idempotency_key
        self._call = None if key is None else "\0".join(key)
        self.attempt = provenance.attempt or 0

    def _name(self, place: Place) -> str | None:
        if self._call is None:
            return None  # outside an activity: nothing retries it
        return _sha(f"{self._call}\0{place.virtual}".encode())[:40]

    def noted(self, place: Place) -> str | None:
        """The sha256 of what this call noted it was putting at ``place``, if it did;
        :class:`Superseded` if a later attempt of it noted that."""
        name = self._name(place)
        if name is None:
            return None
        try:
            fd = os.open(self.folder / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            sha, attempt = _parse(os.pread(fd, 256, 0))
        finally:
            os.close(fd)
        self._check(attempt, place)
        return sha

    def _check(self, attempt: int, place: Place) -> None:
        if attempt > self.attempt:
            raise Superseded(attempt, self.attempt, place.shown)

    @contextmanager
    def putting(self, place: Place, data: bytes) -> Iterator[None]:
        """Note ``data`` as what this attempt is about to put at ``place``, and hold the
        note while the body puts it: :class:`Superseded` (nothing noted) if a later
        attempt of the call noted an edit first; the note as it was if the body raises
        (nothing was put)."""
        name = self._name(place)
        if name is None:
            yield
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(self.folder / name, flags, 0o600)
        try:
            _lock(fd, place)
            before = os.pread(fd, 256, 0)
            self._check(_parse(before)[1], place)
            # written in place (the lock is the file's) and unflushed: a worker that
            # dies, not the host, is what retries; the page cache keeps the note
            _rewrite(fd, f"{_sha(data)} {self.attempt}\n".encode())
            try:
                yield
            except BaseException:
                _rewrite(fd, before)
                raise
        finally:
            os.close(fd)  # releases the lock


def _parse(raw: bytes) -> tuple[str | None, int]:
    """A note's sha and attempt (a note of an earlier version holds only the sha)."""
    sha, _, attempt = raw.decode("ascii", "replace").strip().partition(" ")
    return sha or None, int(attempt) if attempt.isdigit() else 0


def _rewrite(fd: int, data: bytes) -> None:
    os.pwrite(fd, data, 0)
    os.ftruncate(fd, len(data))


def _lock(fd: int, place: Place) -> None:
    deadline = time.monotonic() + LOCK_SECONDS
    while True:
        try:
            lock_exclusive(fd, blocking=False)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise ToolError(
                    f"another attempt of this call is still writing {place.shown}; "
                    "view the file, then retry the edit if it is not there"
                ) from None
            time.sleep(0.01)
