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
import threading
import time
from pathlib import Path

from ._tree import chown_tree

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: How long a look through ``/proc`` may answer for numbers whose leases had ended
#: before it began (see :func:`may_have_processes`).
SCAN_REUSE = 5.0


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
    mounts the store holds (a fresh look through ``/proc``)."""
    return number in _scan()


def may_have_processes(number: int, ended: float) -> bool:
    """:func:`has_processes` for a number nobody has leased since ``ended`` (the latest
    end, by this host's clock, of every lease of it this host's tables know of).

    Once its leases have ended, no process can take ``number`` any more but a child of
    a process that already has it (root never switches to a number it holds no lease
    of), so a look that began after ``ended`` and found none still holds: such a look
    at most :data:`SCAN_REUSE` old answers, as each new agent of a fan-out would
    otherwise read every ``/proc/<pid>/status`` of the host again. A number it finds
    in use is looked for afresh (its process may have ended since)."""
    last = _last
    if last is None or last[0] <= ended or not 0 <= time.time() - last[0] <= SCAN_REUSE:
        return has_processes(number)
    return number in last[1] and has_processes(number)


#: (when the last full look began, every number it found), for :func:`may_have_processes`.
_last: tuple[float, frozenset[int]] | None = None
_scan_lock = threading.Lock()
_HELD = (b"\nUid:", b"\nGid:", b"\nGroups:")


def _scan() -> frozenset[int]:
    """Every uid, gid (real, effective, saved or filesystem) and supplementary group of
    this host's processes, read with one ``open`` and, unless its groups run past the
    first read, one ``read`` of each ``/proc/<pid>/status`` (none when ``/proc`` cannot
    be listed); remembered as the last look."""
    global _last
    began = time.time()
    try:
        names = os.listdir("/proc")
    except OSError:
        return frozenset()
    found: set[int] = set()
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
        for line in _HELD:
            found.update(map(int, _field(status, line)))
    numbers = frozenset(found)
    with _scan_lock:
        if _last is None or _last[0] < began:
            _last = (began, numbers)
    return numbers


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
