"""A command's output streams: the head kept for the result, the whole saved beside the
agent when it does not fit."""

from __future__ import annotations

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
    ``path`` once the stream outgrows the cap."""

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
        self._file: IO[bytes] | None = None

    @property
    def truncated(self) -> bool:
        return self.total > self.cap

    @property
    def spilled(self) -> bool:
        return self._file is not None or self.saved > 0

    def write(self, data: bytes) -> None:
        self.total += len(data)
        self.tail = (self.tail + data[-TAIL_BYTES:])[-TAIL_BYTES:]
        if self._file is None and len(self.head) + len(data) <= self.cap:
            self.head += data
            return
        if self._file is None:
            self._file = _create_beside_agent(self.path, self.user)
            self._save(bytes(self.head))
            room = self.cap - len(self.head)
            self.head += data[: max(room, 0)]
        self._save(data)

    def _save(self, data: bytes) -> None:
        assert self._file is not None
        room = self.save_cap - self.saved
        if room > 0:
            self._file.write(data[:room])
            self.saved += min(room, len(data))

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
