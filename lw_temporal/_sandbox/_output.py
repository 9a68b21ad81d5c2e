"""A command's output streams: the head kept for the result, the whole saved beside the
agent when it does not fit."""

from __future__ import annotations

import contextlib
import json
import os
import stat
from pathlib import Path
from typing import IO

from ._identity import SandboxUser

#: Bytes of a running command's newest output kept for its live view.
TAIL_BYTES = 512
#: Saved outputs one spill looks at, at most, to remove the oldest.
_PRUNE_SCAN = 4096
_SAVED = (".stdout", ".stderr")


#: Characters JSON writes as two (``\\n``): counted as one, so text keeps its cap.
_PAIRS = str.maketrans("", "", '\n\t\r"\\\b\f')


def shown_size(data: bytes) -> int:
    """What ``data`` counts toward a result's cap: what it takes in the result's JSON,
    where a control character shows as ``\\u00NN`` and a byte that is not UTF-8 as
    ``\\xNN`` (six and five bytes for one), except that a character JSON writes as
    two (a newline, a tab, a quote, a backslash) counts one, as in the output. So
    ordinary text keeps the whole cap and no output takes more than twice it. A
    character cut at the end of ``data`` counts as its bytes shown one by one."""
    text = data.decode("utf-8", errors="backslashreplace")
    pairs = len(text) - len(text.translate(_PAIRS))
    return len(json.dumps(text, ensure_ascii=False).encode()) - 2 - pairs


def _create_beside_agent(
    path: Path, user: SandboxUser | None = None, keep: int | None = None
) -> IO[bytes]:
    """Create ``path`` in a folder the sandboxed command can write, as the worker,
    without following any symlink the command planted there (the folder itself or
    the file): otherwise the worker would write wherever the agent points it. Both
    belong to the sandbox user, like everything else in the command's scratch. With
    ``keep``, the saved outputs of earlier commands are first cut to that many bytes
    (:func:`_prune`)."""
    folder = path.parent
    try:
        folder.mkdir(exist_ok=False)
    except FileExistsError:
        if folder.is_symlink() or not folder.is_dir():
            folder.unlink()
            folder.mkdir()
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if keep is not None:
            _prune(dir_fd, keep, spare=path.name.rsplit(".", 1)[0] + ".")
        fd = os.open(
            path.name,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o644,
            dir_fd=dir_fd,
        )
        if user is not None:
            os.fchown(dir_fd, user.uid, user.gid)
            os.fchown(fd, user.uid, user.gid)
    finally:
        os.close(dir_fd)
    return os.fdopen(fd, "wb")


def _prune(dir_fd: int, keep: int, *, spare: str) -> None:
    """Remove the oldest saved outputs while they hold more than ``keep`` bytes on
    disk (those named ``spare...``, the command's own, stay). Every command that says
    more than the cap saves a file, and the files count against the agent's scratch
    quota: a long run's old logs would fill it, and the quota would then take what
    the agent's next command writes. Names are unlinked in the folder opened without
    following links, so nothing outside it is touched."""
    found: list[tuple[int, str, int]] = []
    total = 0
    with os.scandir(dir_fd) as entries:
        for count, entry in enumerate(entries):
            if count >= _PRUNE_SCAN:
                break
            if entry.name.startswith(spare) or not entry.name.endswith(_SAVED):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                size = info.st_blocks * 512
                total += size
                found.append((info.st_mtime_ns, entry.name, size))
    for _, name, size in sorted(found):
        if total <= keep:
            return
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dir_fd)
        total -= size


class OutputSink:
    """Keeps for the result as many bytes as count at most ``cap`` there
    (:func:`shown_size`: a byte of output can take six in the result's JSON, and the
    cap bounds what reaches a workflow history, not only the bytes read); spills
    everything (to ``save_cap``) to ``path`` once the stream outgrows the cap. A file
    that cannot be made or written (a folder the agent made unwritable to a non-root
    worker, a full disk) ends the saving, never the command: ``unsaved`` says why."""

    def __init__(
        self,
        cap: int,
        save_cap: int,
        path: Path,
        user: SandboxUser | None = None,
        keep: int | None = None,
    ) -> None:
        self.user = user
        #: Bytes the agent's earlier saved outputs may hold (the oldest go first).
        self.keep = keep
        self.cap = cap
        self.save_cap = save_cap
        self.path = path
        self.head = bytearray()
        #: What ``head`` takes in the result (:func:`shown_size`).
        self.shown = 0
        #: The newest bytes, for the live view of a running command (heartbeats).
        self.tail = b""
        self.total = 0
        self.saved = 0
        #: Why the stream is not (all) saved although it outgrew the cap, else None.
        self.unsaved: str | None = None
        self._file: IO[bytes] | None = None
        self._spilling = False

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head)

    @property
    def spilled(self) -> bool:
        return self._file is not None or self.saved > 0

    def write(self, data: bytes) -> None:
        self.total += len(data)
        self.tail = (self.tail + data[-TAIL_BYTES:])[-TAIL_BYTES:]
        if not self._spilling:
            cost = shown_size(data) if len(self.head) + len(data) <= self.cap else None
            if cost is not None and self.shown + cost <= self.cap:
                self.head += data
                self.shown += cost
                return
            self._spilling = True
            first = bytes(self.head)
            self.head += self._fitting(data)
            try:
                self._file = _create_beside_agent(self.path, self.user, self.keep)
            except OSError as err:
                self.unsaved = err.strerror or str(err)
                return
            self._save(first)
        self._save(data)

    def _fitting(self, data: bytes) -> bytes:
        """The longest start of ``data`` that still fits the cap in the result."""
        room = self.cap - self.shown
        low, high = 0, min(len(data), max(room, 0))
        while low < high:  # the shown size grows with the length: search it
            middle = (low + high + 1) // 2
            if shown_size(data[:middle]) <= room:
                low = middle
            else:
                high = middle - 1
        self.shown += shown_size(data[:low])
        return data[:low]

    def _save(self, data: bytes) -> None:
        room = self.save_cap - self.saved
        if self._file is None or self.unsaved is not None or room <= 0:
            return
        try:
            self._file.write(data[:room])
        except OSError as err:
            self.unsaved = err.strerror or str(err)
            return
        self.saved += min(room, len(data))

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):  # a full disk's buffered bytes: unsaved
                self._file.close()
