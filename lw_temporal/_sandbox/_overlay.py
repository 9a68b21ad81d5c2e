"""Reading what a command changed in an overlay-mounted folder.

Only the overlay's upper dir is walked, so the cost follows what the command changed,
never the size of the folder underneath. Overlayfs records (mounted with
``userxattr``): a deleted entry as a 0:0 character device (a whiteout), a folder that
replaced a lower one as a directory with ``user.overlay.opaque = y``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import stat
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from .._changes import CONTROL_CHARS, StoreChange
from ._exits import at_exit
from ._identity import SandboxUser
from ._landlock import SHM, on_tmpfs
from ._threadmounts import ThreadMounts
from ._tree import remove_tree

_OPAQUE_XATTRS = ("user.overlay.opaque", "trusted.overlay.opaque")
#: Linux's PATH_MAX: no path the walk hands on may be longer (with its NUL).
_PATH_MAX = 4096
_CONTROL = CONTROL_CHARS


@dataclass(frozen=True, slots=True)
class CaptureLimits:
    """What one command may leave in one overlay before any of it is considered.

    Past a limit the walk stops and the command's memory changes are refused whole,
    without reading a file's bytes: sizes come from ``lstat``."""

    #: Entries (files, folders, deletions) in the upper folder.
    max_entries: int = 10_000
    #: Folders inside one another.
    max_depth: int = 64
    #: Bytes of one file (``lstat`` size, so a sparse file counts at its full size).
    max_file_bytes: int = 64 * 1024 * 1024
    #: Bytes of all files together.
    max_total_bytes: int = 256 * 1024 * 1024
    #: UTF-8 bytes of one name, and of a path relative to the folder.
    max_name_bytes: int = 255
    max_path_bytes: int = 1024


@dataclass(frozen=True, slots=True)
class UpperRefusal:
    """An entry not kept. ``blocks``: nothing of the command may be kept either (a
    hostile name or shape), as opposed to one entry left out (a symlink)."""

    path: str
    reason: str
    blocks: bool = False


def shown_name(name: str) -> str:
    """``name`` as printable, JSON-safe text: undecodable bytes as ``\\xNN`` and
    control characters as ``\\xNN`` too (what a refusal quotes back)."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return _CONTROL.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def name_problem(name: str, limits: CaptureLimits) -> str | None:
    """Why a name cannot enter a store: every later listing, result, audit line and
    restore carries it as JSON text, so it must be printable UTF-8 of bounded size."""
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "the name is not valid UTF-8; memory keeps UTF-8 names only, rename it"
    if _CONTROL.search(name):
        return (
            "the name contains a control character (newline, tab, escape, a bidi or line "
            "separator mark...); rename it with printable characters"
        )
    if size > limits.max_name_bytes:
        return f"the name is {size} bytes, the limit is {limits.max_name_bytes}; shorten it"
    return None


def _opaque(path: str) -> bool:
    for name in _OPAQUE_XATTRS:
        try:
            if os.getxattr(path, name, follow_symlinks=False) == b"y":
                return True
        except OSError:
            continue
    return False


def _same_content(a: str, size: int, b: Path) -> bool:
    """Whether the upper file ``a`` (of ``size`` bytes) holds what ``b`` holds."""
    try:
        st = os.lstat(b)
        if not stat.S_ISREG(st.st_mode) or st.st_size != size:
            return False
        with open(a, "rb") as fa, open(b, "rb") as fb:
            while True:
                chunk = fa.read(1 << 16)
                if chunk != fb.read(1 << 16):
                    return False
                if not chunk:
                    return True
    except OSError:
        return False


class _Blocked(Exception):
    def __init__(self, refusal: UpperRefusal) -> None:
        self.refusal = refusal


def collect_changes(
    upper: Path, lower: Path, limits: CaptureLimits | None = None
) -> tuple[list[StoreChange], list[UpperRefusal]]:
    """The changes recorded in ``upper`` relative to ``lower``, parents first.

    Symlinks, devices, fifos and sockets are left out: a memory store holds files
    and folders only (a symlink there could later point a reader anywhere). A file
    copied up without a content change (``touch``, ``chmod``) is no change. Past any
    of ``limits``, or on a name no store can hold, the answer is no change and one
    refusal that ``blocks``. The walk is iterative, so no depth exhausts the stack.
    """
    limits = limits or CaptureLimits()
    if not upper.is_dir():
        return [], []
    try:
        return _walk(str(upper), lower, limits)
    except _Blocked as blocked:
        return [], [blocked.refusal]


def _walk(
    upper: str, lower: Path, limits: CaptureLimits
) -> tuple[list[StoreChange], list[UpperRefusal]]:
    changes: list[StoreChange] = []
    refused: list[UpperRefusal] = []
    entries = 0
    total = 0
    # Both the staged file and its store twin must stay openable by path.
    longest = max(len(os.fsencode(upper)), len(os.fsencode(lower)))
    room = min(limits.max_path_bytes, _PATH_MAX - 1 - longest - 1)
    # (folder, its path relative to upper with a trailing slash, depth)
    stack: list[tuple[str, str, int]] = [(upper, "", 0)]
    while stack:
        folder, rel, depth = stack.pop()
        listed: list[os.DirEntry[str]] = []
        with os.scandir(folder) as scan:
            for entry in scan:  # counted as read: a huge folder is never held whole
                entries += 1
                if entries > limits.max_entries:
                    raise _too_many(limits)
                listed.append(entry)
        listed.sort(key=lambda e: e.name)
        below: list[tuple[str, str, int]] = []
        for entry in listed:
            path = f"{rel}{entry.name}"
            problem = name_problem(entry.name, limits)
            if problem is None and len(path.encode()) > room:
                problem = f"the path is longer than {room} bytes; use a shorter one"
            if problem is not None:
                raise _Blocked(UpperRefusal(path, problem, blocks=True))
            st = entry.stat(follow_symlinks=False)
            mode = st.st_mode
            target = lower / path
            if stat.S_ISCHR(mode) and st.st_rdev == 0:
                if target.exists() or target.is_symlink():
                    changes.append(StoreChange(path, "delete"))
            elif stat.S_ISDIR(mode):
                if depth + 1 > limits.max_depth:
                    raise _Blocked(
                        UpperRefusal(
                            path,
                            f"folders nest more than {limits.max_depth} deep; use a flatter layout",
                            blocks=True,
                        )
                    )
                if _opaque(entry.path) and (target.exists() or target.is_symlink()):
                    changes.append(StoreChange(path, "delete"))
                    changes.append(StoreChange(path, "mkdir"))
                elif not target.is_dir() or target.is_symlink():
                    changes.append(StoreChange(path, "mkdir"))
                below.append((entry.path, path + "/", depth + 1))
            elif stat.S_ISREG(mode):
                size = st.st_size
                total += size
                if size > limits.max_file_bytes or total > limits.max_total_bytes:
                    raise _Blocked(UpperRefusal(path, _too_big(size, total, limits), blocks=True))
                if target.is_dir() and not target.is_symlink():  # a file over a folder
                    changes.append(StoreChange(path, "delete"))
                if not _same_content(entry.path, size, target):
                    changes.append(StoreChange(path, "write", Path(entry.path), size))
            elif stat.S_ISLNK(mode):
                refused.append(UpperRefusal(path, "symlinks are not kept in memory; copy the file"))
            else:
                refused.append(
                    UpperRefusal(
                        path, "only files and folders are kept (no devices, fifos or sockets)"
                    )
                )
        stack.extend(reversed(below))
    return changes, refused


def _too_many(limits: CaptureLimits) -> _Blocked:
    return _Blocked(
        UpperRefusal(
            ".",
            f"the command left more than {limits.max_entries} entries (files, folders or "
            "deletions); change fewer at once",
            blocks=True,
        )
    )


def _too_big(size: int, total: int, limits: CaptureLimits) -> str:
    if size > limits.max_file_bytes:
        return (
            f"the file is {size} bytes (its apparent size, sparse or not), the limit is "
            f"{limits.max_file_bytes}"
        )
    return f"the command's files add up to over {limits.max_total_bytes} bytes; write less at once"


def apply_changes(root: Path, changes: list[StoreChange]) -> None:
    """Apply changes to a plain folder: each file replaced atomically (temp + rename),
    so a reader sees the old or the new content, never a half-written file."""
    for change in changes:
        target = root / change.path
        if change.kind == "delete":
            if target.is_dir() and not target.is_symlink():
                remove_tree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()
        elif change.kind == "mkdir":
            if target.is_symlink() or (target.exists() and not target.is_dir()):
                target.unlink()
            target.mkdir(parents=True, exist_ok=True)
        else:
            assert change.source is not None
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_dir() and not target.is_symlink():
                remove_tree(target)
            temp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
            shutil.copyfile(change.source, temp)
            os.chmod(temp, 0o644)
            os.replace(temp, target)


#: The name of a worker's staging folder on ``/dev/shm`` starts with this and its owner.
SHM_STAGING_PREFIX = "lw-staging-"

#: Staging folders go to ``/dev/shm`` when it is a tmpfs with at least this much room.
_SHM_ROOM = 1 << 30


def staging_root(default: Path, user: SandboxUser | None, owner: str) -> Path:
    """Where a command's overlay staging folders live: a private folder on
    ``/dev/shm`` when that is a tmpfs with room and user xattrs (which the overlay
    records deletions and replaced folders in), else ``default`` on the data disk.

    On a tmpfs, mounting an overlay (its probes of the upper file system), copying a
    file up and unmounting never wait on the worker's disk journal, which other
    writers share; what a command stages is in memory until its commit (bounded by
    the command's limits and the capture limits, and charged to its memory cgroup).
    The folder is the worker process's own, one per ``default`` (``root:<sandbox
    group>`` 0750 for a root worker), removed when the worker exits, and named after
    its ``owner`` (see :mod:`._leftovers`) so that a killed worker's is swept by the
    next one that starts."""
    shared = _shm_root(default, user.gid if user is not None else None, owner)
    return shared if shared is not None else default


def _remove_root(root: Path) -> None:
    """At exit: what the exiting thread keeps mounted below ``root`` goes first."""
    mounts = ThreadMounts.existing()
    if mounts is not None:
        mounts.release_under(os.fsencode(root))
    with contextlib.suppress(OSError):
        remove_tree(root)


@functools.cache
def _shm_root(default: Path, gid: int | None, owner: str) -> Path | None:
    try:
        if not on_tmpfs(SHM):
            return None
        room = os.statvfs(SHM)
        if room.f_bavail * room.f_frsize < _SHM_ROOM:
            return None
        root = Path(tempfile.mkdtemp(prefix=f"{SHM_STAGING_PREFIX}{owner}.", dir=SHM))
    except OSError:
        return None
    at_exit(_remove_root, root)
    try:
        os.setxattr(root, "user.lw-probe", b"1")
        os.removexattr(root, "user.lw-probe")
        if gid is not None:
            os.chown(root, -1, gid)
            os.chmod(root, 0o750)
    except OSError:
        with contextlib.suppress(OSError):
            remove_tree(root)
        return None
    return root
