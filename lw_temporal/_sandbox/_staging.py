"""Overlay staging folders: made for one sandbox user, reused only when pristine.

A staging folder holds one command's overlay of a writable memory mount: ``upper``
(what the command writes; it is also the overlay's root, so a ``chmod``, ``touch``
or ``setfattr`` of ``/mnt/memory/workflow`` itself lands on it), ``work``, and the
mount points ``merged`` and ``lower``. Making and removing the four folders per
command costs about as much as the overlay mount, so a folder the command left as it
found it is kept for the next command of the same sandbox user (see ``lw.bash``), and
so is the overlay mounted on it (:mod:`._threadmounts`).

"As it found it" is decided by the upper folder alone, against what it was when the
command started (:func:`mark_started`): no entry in it, and the same inode, mode,
owner, modification and change times. Every change the kernel makes to a folder
(an entry made or removed, a mode, owner, time or extended attribute set) moves its
change time, which no command can set back, so a planner's ``chmod 0`` or ``touch -d
@0`` on its memory mount never reaches the next command of another workflow or
store: such a folder is removed instead. A folder is never handed to another user.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ._identity import SandboxUser

#: (inode, mode, uid, gid, mtime, ctime) of each staging folder's upper folder when
#: its last command started, by staging folder.
_started: dict[str, tuple[int, ...]] = {}
_MAX_TRACKED = 4096


def _snapshot(upper: str) -> tuple[int, ...]:
    st = os.lstat(upper)
    return (st.st_ino, st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns, st.st_ctime_ns)


def make_staging(folder: Path, user: SandboxUser | None) -> Path:
    """Create the staging folder set ``folder`` for commands of ``user``: only that
    user (through its group) may pass through it, to the merged folder bwrap binds;
    the upper folder, the overlay's root, is the user's own."""
    folder.mkdir(mode=0o700)
    for name in ("upper", "work", "merged", "lower"):
        (folder / name).mkdir(mode=0o700)
    if user is not None:
        os.chown(folder, 0, user.gid)
        os.chmod(folder, 0o710)
        user.own(folder / "upper", 0o755)
    else:
        os.chmod(folder / "upper", 0o755)
    return folder


def mark_started(folder: str) -> None:
    """Record the upper folder of ``folder`` as a command using it starts."""
    if len(_started) >= _MAX_TRACKED:
        _started.clear()  # unknown folders count as changed: they are made anew
    try:
        _started[folder] = _snapshot(os.path.join(folder, "upper"))
    except OSError:
        _started.pop(folder, None)


def staging_changed(staging: os.PathLike[str] | str) -> bool:
    """Whether a command changed anything through the overlay of this staging folder:
    an entry in its upper folder, or any change of the upper folder itself since the
    command started (see the module). Unknown or unreadable counts as changed."""
    folder = os.fspath(staging)
    upper = os.path.join(folder, "upper")
    try:
        if _started.get(folder) != _snapshot(upper):
            return True
        with os.scandir(upper) as entries:
            return next(entries, None) is not None
    except OSError:
        return True


def forget_staging(folder: os.PathLike[str] | str) -> None:
    """``folder`` is removed (or given up): nothing of it may be taken as pristine."""
    _started.pop(os.fspath(folder), None)


class StagingPool:
    """The idle staging folders of one worker, per thread: the thread that ran a
    command keeps an overlay mounted on its folder for the next one, which no other
    thread may reuse. The caller unmounts (``release_staging``) and removes what it is
    handed back."""

    def __init__(self, max_idle: int = 16) -> None:
        self.max_idle = max_idle
        self._idle: dict[int, list[Path]] = {}

    def take(self, root: Path, user: SandboxUser | None) -> tuple[Path | None, list[Path]]:
        """A pristine idle folder of ``user`` under ``root`` (or ``None``), and the
        idle ones found changed on the way, to remove."""
        idle = self._idle.get(threading.get_ident(), [])
        uid = os.geteuid() if user is None else user.uid
        stale: list[Path] = []
        for index in range(len(idle) - 1, -1, -1):
            folder = idle[index]
            if folder.parent != root or _owner(folder / "upper") != uid:
                continue
            del idle[index]
            if not staging_changed(folder):
                return folder, stale
            stale.append(folder)
        return None, stale

    def keep(self, folder: Path) -> list[Path]:
        """Keep ``folder`` for the next command if its command left it pristine;
        returns what to remove now (it, or the oldest idle one past the bound)."""
        if staging_changed(folder):
            return [folder]
        idle = self._idle.setdefault(threading.get_ident(), [])
        idle.append(folder)
        return [idle.pop(0)] if len(idle) > self.max_idle else []


def _owner(folder: Path) -> int:
    try:
        return os.lstat(folder).st_uid
    except OSError:
        return -1
