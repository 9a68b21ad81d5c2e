"""How the lease tables write their small files: whole, by rename, durably on request.

A table's files are read by workers of other hosts (a shared volume), so each is
replaced at once by a rename and never written in place; a durable write has its data
synced before the rename and the folder synced after it, so neither the bytes nor the
rename can be lost in a crash of the host once it returns.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path


def read_small(path: Path) -> bytes:
    """A small file's bytes (one ``open``, a ``read`` or two)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = [os.read(fd, 65536)]
        while chunks[-1]:
            chunks.append(os.read(fd, 65536))
        return b"".join(chunks)
    finally:
        os.close(fd)


def prepare(folder: Path, data: bytes, *, durable: bool) -> Path:
    """A new file in ``folder`` holding ``data`` (on disk when ``durable``), to be
    renamed to its name."""
    tmp = folder / f".tmp-{uuid.uuid4().hex}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data)
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    os.close(fd)
    return tmp


def sync_folder(folder: Path) -> None:
    """Make what was renamed into ``folder`` durable (the rename is the folder's)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path: Path, data: bytes, *, durable: bool) -> None:
    """Replace ``path`` by ``data`` at once; when ``durable``, the data and the rename
    are on disk before it returns."""
    os.replace(prepare(path.parent, data, durable=durable), path)
    if durable:
        sync_folder(path.parent)
