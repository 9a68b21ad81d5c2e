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
"""

from __future__ import annotations

import hashlib
import os
from contextlib import suppress
from pathlib import Path

from ..memory import _fs
from ..memory._records import Provenance
from ._paths import Place

#: The agent's notes, beside its conversations' folders.
FOLDER = "edits"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ScratchOnce:
    """The notes of one agent (``books``: its conversation bookkeeping folder)."""

    def __init__(self, books: Path, provenance: Provenance) -> None:
        self.folder = books / FOLDER
        key = provenance.idempotency_key
        self._call = None if key is None else "\0".join(key)

    def _name(self, place: Place) -> str | None:
        if self._call is None:
            return None  # outside an activity: nothing retries it
        return _sha(f"{self._call}\0{place.virtual}".encode())[:40]

    def noted(self, place: Place) -> str | None:
        """The sha256 of what this call noted it was putting at ``place``, if it did."""
        name = self._name(place)
        if name is None:
            return None
        try:
            fd = os.open(self.folder / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            return _fs.read_fd(fd).decode("ascii", "replace").strip()
        finally:
            os.close(fd)

    def will_put(self, place: Place, data: bytes) -> None:
        """Note ``data`` as what this call is about to put at ``place``."""
        name = self._name(place)
        if name is None:
            return
        # unflushed: a worker that dies, not the host, is what retries; the page cache
        # keeps the note
        _fs.write_atomic(self.folder / name, (_sha(data) + "\n").encode(), sync=False)

    def withdraw(self, place: Place) -> None:
        """The put noted for ``place`` did not happen (its name was taken)."""
        name = self._name(place)
        if name is not None:
            with suppress(FileNotFoundError):
                os.unlink(self.folder / name)
