"""What a leased number owns on disk, and how it is given and taken back.

A number owns one folder: an agent's scratch (as its uid and gid, whole) or a memory
store's root (as its group only; the files stay root's). Before a number goes to
another key its old folder stops being its, and no process of the number may be
left, so a file an agent left is never readable by the next holder of its number.
Everything here is done as root by descriptor or without following links, never
through a link or onto a mount.
"""

from __future__ import annotations

import os
from pathlib import Path

from ._tree import chown_tree

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def give_up(folder: Path, kind: str, number: int) -> None:
    """Before ``number`` goes to another key: nothing of ``folder`` (a ``store`` root
    or a ``run`` scratch) stays its."""
    try:
        if kind == "store":
            st = os.lstat(folder)
            if st.st_gid == number or st.st_uid == number:
                os.chown(folder, 0, 0, follow_symlinks=False)
        else:
            chown_tree(folder, 0, 0, owners=frozenset({number}))
    except FileNotFoundError:
        pass


def take(folder: Path, kind: str, number: int, *, fresh: bool) -> None:
    """Give ``folder`` to ``number``: a store root its group (mode 0750), a scratch
    itself (mode 0750, its group being who may read it) and, when the key is new to
    the number, everything in it the worker or an earlier holder left."""
    try:
        if kind == "store":
            ensure_folder(folder, 0, number)
        else:
            ensure_folder(folder, number, number)
            if fresh:
                chown_tree(folder, number, number, owners=None)
    except FileNotFoundError:
        pass  # made later: its first command sets its owner (ensure_folder)


def ensure_folder(folder: Path, uid: int, gid: int, mode: int = 0o750) -> None:
    """``folder`` (not a link) owned ``uid``:``gid`` with ``mode``; a missing one is
    left missing. One ``lstat`` when all is as it should be."""
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return
    if (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (uid, gid, mode):
        return
    fd = os.open(folder, _DIR_FLAGS)
    try:
        os.fchown(fd, uid, gid)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def has_processes(number: int) -> bool:
    """Whether a process of this host (its pid namespace) holds ``number`` as its real,
    effective, saved or filesystem uid or gid, or as a supplementary group: an agent's
    number is its uid and gid, a store's the group of its root, which every agent that
    mounts the store holds (every ``/proc/<pid>/status`` read with one ``open`` and,
    unless its groups run past the first read, one ``read``: each new agent of a busy
    host looks through them all)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return False
    wanted = str(number).encode()
    for name in names:
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{name}/status", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            status = _status_head(fd)
        except OSError:
            continue
        finally:
            os.close(fd)
        if any(wanted in _field(status, line) for line in (b"\nUid:", b"\nGid:", b"\nGroups:")):
            return True
    return False


def _status_head(fd: int) -> bytes:
    """A status file up to the end of its ``Groups`` line (which comes after the
    ``Uid`` and ``Gid`` lines)."""
    status = os.read(fd, 4096)
    while True:
        start = status.find(b"\nGroups:")
        if start >= 0 and status.find(b"\n", start + 1) >= 0:
            return status
        more = os.read(fd, 65536)
        if not more:
            return status
        status += more


def _field(status: bytes, line: bytes) -> list[bytes]:
    start = status.find(line)
    if start < 0:
        return []
    end = status.find(b"\n", start + len(line))
    return status[start + len(line) : None if end < 0 else end].split()
