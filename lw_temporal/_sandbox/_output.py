"""A command's output streams: the head kept for the result, the whole saved beside the
agent when it does not fit."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import IO

from ._identity import SandboxUser

#: Bytes of a running command's newest output kept for its live view.
TAIL_BYTES = 512


def _create_beside_agent(path: Path, user: SandboxUser | None = None) -> IO[bytes]:
    """Create ``path`` in a folder the sandboxed command can write, as the worker,
    without following any symlink the command planted there (the folder itself or
    the file): otherwise the worker would write wherever the agent points it. Both
    belong to the sandbox user, like everything else in the command's scratch."""
    folder = path.parent
    try:
        folder.mkdir(exist_ok=False)
    except FileExistsError:
        if folder.is_symlink() or not folder.is_dir():
            folder.unlink()
            folder.mkdir()
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
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


class OutputSink:
    """Keeps ``cap`` bytes for the result; spills everything (to ``save_cap``) to
    ``path`` once the stream outgrows the cap. A file that cannot be made or written
    (a folder the agent made unwritable to a non-root worker, a full disk) ends the
    saving, never the command: ``unsaved`` says why."""

    def __init__(
        self, cap: int, save_cap: int, path: Path, user: SandboxUser | None = None
    ) -> None:
        self.user = user
        self.cap = cap
        self.save_cap = save_cap
        self.path = path
        self.head = bytearray()
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
        return self.total > self.cap

    @property
    def spilled(self) -> bool:
        return self._file is not None or self.saved > 0

    def write(self, data: bytes) -> None:
        self.total += len(data)
        self.tail = (self.tail + data[-TAIL_BYTES:])[-TAIL_BYTES:]
        if not self._spilling and len(self.head) + len(data) <= self.cap:
            self.head += data
            return
        if not self._spilling:
            self._spilling = True
            first = bytes(self.head)
            self.head += data[: max(self.cap - len(self.head), 0)]
            try:
                self._file = _create_beside_agent(self.path, self.user)
            except OSError as err:
                self.unsaved = err.strerror or str(err)
                return
            self._save(first)
        self._save(data)

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
