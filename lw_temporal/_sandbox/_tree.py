"""Folder trees walked, re-owned and removed by descriptor, so that nothing a command
does meanwhile can steer the worker, which does all of it as root.

A command of an agent may run while the worker measures, trims or re-owns that
agent's scratch, and an earlier walk that climbed back with ``..`` could be led out of
the tree: a folder renamed elsewhere while the walk was inside it has another ``..``
(the measured attack: the quota trim removed an older folder of the same name). Every
walk here instead:

* opens each folder relative to the descriptor of its parent, never through a link
  and never onto another mount (``openat2`` with ``RESOLVE_NO_XDEV`` and
  ``RESOLVE_NO_SYMLINKS``; a mount point below a staging folder, such as a store
  folder still bound there, is never entered), and checks that the folder opened is
  the one listed (device and inode);
* holds the descriptors of the folders it is in, so it goes back up to a folder it
  holds, never by name; removal never opens ``..`` at all: below :data:`HELD` levels
  it moves the deeper folder up under the tree's root (by descriptor, inside the same
  tree) and removes it from there, so any depth costs a bounded number of descriptors;
  a read-only walk (measuring, re-owning) climbs from deeper than that through ``..``
  only after checking it is the folder it came from, and otherwise goes back down from
  the folders it holds by the names and inodes it recorded;
* names entries only relative to a held descriptor (``unlinkat``, ``fchownat``).

A worker that is not root (the compose worker) removes the folders it owns whatever
their modes: a used overlay's work folder holds the kernel's ``work/incompat/volatile``
marker, mode 000, made where the worker's uid was root of the command's user
namespace. A folder of the worker's own uid that its mode closes to it is given
``u+rwx`` (by descriptor, the very folder listed) before it is emptied; another
user's folder is never opened that way.

A folder a command renames away while it is walked is no longer part of the tree and
is left where it went; what a command adds meanwhile is removed with the rest or the
removal fails with ``ENOTEMPTY`` after a few passes (it never loops forever).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import stat
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: The folder descriptors one walk holds at most (its depth with them all held).
HELD = 64
#: How often a folder is listed again when entries keep appearing in it.
_PASSES = 8

_SYS_OPENAT2 = 437  # the same number on every architecture (a new, shared call)
_RESOLVE_NO_XDEV = 0x01
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_AT_EMPTY_PATH = 0x1000

Ident = tuple[int, int]


class _OpenHow(ctypes.Structure):
    _fields_ = (
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    )


@functools.cache
def _calls() -> tuple[Any, Any] | None:
    """``openat2`` and ``fchownat`` from libc, or ``None`` on a kernel without
    ``openat2`` (before 5.6: plain ``openat``, and the device checked instead)."""
    libc = ctypes.CDLL(None, use_errno=True)
    call = libc.syscall
    call.restype = ctypes.c_long
    how = _how(_DIR_FLAGS)
    probe = call(_SYS_OPENAT2, -100, b".", ctypes.byref(how), ctypes.sizeof(how))
    if probe < 0:
        return None
    os.close(probe)
    fchownat = libc.fchownat
    fchownat.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_int]
    return call, fchownat


@functools.cache
def _how(flags: int) -> _OpenHow:
    resolve = _RESOLVE_NO_XDEV | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS | _RESOLVE_BENEATH
    return _OpenHow(flags, 0, resolve)


def ident(info: os.stat_result) -> Ident:
    return (info.st_dev, info.st_ino)


def _open_at(dir_fd: int, name: str, flags: int) -> int:
    calls = _calls()
    if calls is None:
        fd = os.open(name, flags, dir_fd=dir_fd)
        if os.fstat(fd).st_dev != os.fstat(dir_fd).st_dev:
            os.close(fd)
            raise OSError(errno.EXDEV, "a mount point; not entered", name)
        return fd
    how = _how(flags)
    fd = int(calls[0](_SYS_OPENAT2, dir_fd, os.fsencode(name), ctypes.byref(how), 24))
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), name)
    return fd


def open_dir_at(dir_fd: int, name: str, expect: Ident | None = None) -> int:
    """A descriptor of the folder ``name`` in ``dir_fd``: not through a link, not onto
    another mount, and (with ``expect``) the very folder of that device and inode.
    Raises ``OSError`` otherwise (``ENOENT`` when a different folder is there now)."""
    fd = _open_at(dir_fd, name, _DIR_FLAGS)
    if expect is not None and ident(os.fstat(fd)) != expect:
        os.close(fd)
        raise OSError(errno.ENOENT, "replaced while it was walked; not entered", name)
    return fd


def chown_at(dir_fd: int, name: str, uid: int, gid: int) -> None:
    """``chown`` of the entry ``name`` itself (a link is not followed), never of what
    is mounted there."""
    fd = _open_at(dir_fd, name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        calls = _calls()
        if calls is None:
            os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)
        elif calls[1](fd, b"", uid, gid, _AT_EMPTY_PATH) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), name)
    finally:
        os.close(fd)


# -- removal ----------------------------------------------------------------------------


@dataclass(slots=True)
class _Level:
    fd: int
    name: str
    ident: Ident
    #: Subfolders still to empty and remove: (name, device and inode).
    pending: list[tuple[str, Ident]] | None = None
    passes: int = 0


def remove_tree(path: Path) -> None:
    """Remove ``path`` and everything below it (missing is fine). The folders above
    ``path`` are the worker's own; below it nothing is followed (see the module)."""
    try:
        parent = os.open(path.parent, _DIR_FLAGS)
    except FileNotFoundError:
        return
    try:
        remove_at(parent, path.name)
    finally:
        os.close(parent)


def remove_at(dir_fd: int, name: str, expect: Ident | None = None) -> bool:
    """Remove the entry ``name`` of the folder ``dir_fd`` and all below it; with
    ``expect``, only if it is still the entry of that device and inode. Returns
    whether something was removed; raises ``OSError`` for what could not be."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if expect is not None and ident(info) != expect:
        return False
    if not stat.S_ISDIR(info.st_mode):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dir_fd)
        return True
    for _ in range(_PASSES):
        fd = _open_to_empty(dir_fd, name, ident(info))
        try:
            _empty(fd, name, ident(info))
        finally:
            os.close(fd)
        try:
            os.rmdir(name, dir_fd=dir_fd)
            return True
        except FileNotFoundError:
            return True
        except OSError as err:
            if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
    raise OSError(errno.ENOTEMPTY, "entries kept appearing while it was removed", name)


def _empty(root_fd: int, root_name: str, root_ident: Ident) -> None:
    """Remove everything below the folder ``root_fd`` (which stays)."""
    levels = [_Level(root_fd, root_name, root_ident)]
    try:
        while levels:
            top = levels[-1]
            if top.pending is None:
                top.pending = _clear(top.fd)
            if top.pending:
                name, child = top.pending.pop()
                if len(levels) >= HELD:
                    _flatten(top, name, child, levels[0])
                    continue
                try:
                    fd = _open_to_empty(top.fd, name, child)
                except OSError as err:
                    if err.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                        continue  # gone or replaced meanwhile: the next pass sees it
                    raise
                levels.append(_Level(fd, name, child))
                continue
            levels.pop()
            if not levels:
                break
            os.close(top.fd)
            _remove_empty(levels[-1], top)
    finally:
        for level in levels[1:]:
            os.close(level.fd)


def _open_to_empty(dir_fd: int, name: str, expect: Ident) -> int:
    """:func:`open_dir_at` of a folder about to be emptied and removed; a folder of the
    worker's own uid whose mode closes it to its owner is opened up first (see the
    module), so that it can be listed and what it holds unlinked."""
    try:
        fd = open_dir_at(dir_fd, name, expect)
    except PermissionError:
        if not _open_up(dir_fd, name, expect):
            raise
        fd = open_dir_at(dir_fd, name, expect)
    try:
        info = os.fstat(fd)
        if info.st_uid == os.geteuid() and info.st_mode & stat.S_IRWXU != stat.S_IRWXU:
            os.fchmod(fd, stat.S_IMODE(info.st_mode) | stat.S_IRWXU)
    except OSError:
        os.close(fd)
        raise
    return fd


def _open_up(dir_fd: int, name: str, expect: Ident) -> bool:
    """Give the folder ``name`` (that very folder, not a link) ``u+rwx`` when it is the
    worker's own; whether it was."""
    try:
        fd = _open_at(dir_fd, name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if ident(info) != expect or info.st_uid != os.geteuid():
            return False
        # an O_PATH descriptor takes no fchmod; its /proc link names the folder itself
        os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(info.st_mode) | stat.S_IRWXU)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _clear(fd: int) -> list[tuple[str, Ident]]:
    """Unlink every entry of ``fd`` but folders, remove its empty folders, and list
    the others (in inode order, as ``rm`` does: far fewer seeks in a large folder)."""
    with os.scandir(fd) as scan:
        entries = sorted(scan, key=lambda e: e.inode())
    folders: list[tuple[str, Ident]] = []
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(info.st_mode):
            try:
                os.unlink(entry.name, dir_fd=fd)
            except FileNotFoundError:
                pass
            except IsADirectoryError:
                pass  # replaced by a folder meanwhile: the folder is listed again
            continue
        try:
            os.rmdir(entry.name, dir_fd=fd)  # most folders are empty by now
        except FileNotFoundError:
            pass
        except OSError:
            folders.append((entry.name, ident(info)))
    return folders


def _remove_empty(parent: _Level, done: _Level) -> None:
    """Remove the folder ``done`` has emptied from ``parent``: when something else is
    there now (or it is not empty after all), ``parent`` is listed again."""
    try:
        here = os.stat(done.name, dir_fd=parent.fd, follow_symlinks=False)
        if ident(here) == done.ident:
            os.rmdir(done.name, dir_fd=parent.fd)
            return
    except FileNotFoundError:
        return
    except OSError as err:
        if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
    parent.passes += 1
    if parent.passes > _PASSES:
        raise OSError(errno.ENOTEMPTY, "entries kept appearing while it was removed", done.name)
    parent.pending = None


def _flatten(top: _Level, name: str, child: Ident, root: _Level) -> None:
    """Move a folder too deep to enter up under the tree's root (both held by
    descriptor, so it stays inside the tree), where a later step removes it."""
    moved = f".lw-deep-{uuid.uuid4().hex}"
    try:
        try:
            os.rename(name, moved, src_dir_fd=top.fd, dst_dir_fd=root.fd)
        except PermissionError:  # a folder moved to another parent must be writable
            if not _open_up(top.fd, name, child):
                raise
            os.rename(name, moved, src_dir_fd=top.fd, dst_dir_fd=root.fd)
    except FileNotFoundError:
        return
    assert root.pending is not None
    root.pending.insert(0, (moved, child))  # the same folder: a rename keeps its inode


# -- read-only walks ---------------------------------------------------------------------


@dataclass(slots=True)
class Entry:
    """One entry met by :func:`walk`: its names from the root, its ``lstat``, and the
    descriptor of the folder holding it (valid until the walk goes on)."""

    names: tuple[str, ...]
    info: os.stat_result
    dir_fd: int


@dataclass(slots=True)
class _Frame:
    fd: int
    names: tuple[str, ...]
    ident: Ident
    folders: list[tuple[str, Ident]] = field(default_factory=list)


def walk(root_fd: int, limit: int) -> Iterator[Entry]:
    """Every entry below the folder ``root_fd`` (the caller's descriptor), at most
    ``limit`` of them, a folder's entries before what is below them. Folders are
    entered as the module says; one that cannot be (a mount point, replaced or gone
    meanwhile) is skipped with what it holds."""
    frames = [_Frame(root_fd, (), ident(os.fstat(root_fd)))]
    frame: _Frame | None = frames[0]
    seen = 0
    try:
        while frame is not None:
            with contextlib.suppress(OSError), os.scandir(frame.fd) as scan:
                for item in scan:
                    try:
                        info = item.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    seen += 1
                    yield Entry((*frame.names, item.name), info, frame.fd)
                    if seen >= limit:
                        return
                    if stat.S_ISDIR(info.st_mode):
                        frame.folders.append((item.name, ident(info)))
            frame = _advance(frames)
    finally:
        for held in frames[1:]:
            if held.fd >= 0:
                os.close(held.fd)


def _advance(frames: list[_Frame]) -> _Frame | None:
    """Enter the next folder to list (below, beside, or above and beside the last
    one), ``frames`` being the path to it; ``None`` once the walk is done."""
    while frames:
        top = frames[-1]
        while top.folders:
            name, child = top.folders.pop()
            try:
                fd = open_dir_at(top.fd, name, child)
            except OSError:
                continue
            if len(frames) > HELD:  # deeper than the held levels: hold the last only
                os.close(top.fd)
                top.fd = -1
            frames.append(_Frame(fd, (*top.names, name), child))
            return frames[-1]
        done = frames.pop()
        if not frames:
            return None
        if frames[-1].fd < 0:
            _regain(frames, done.fd)
        os.close(done.fd)
    return None


def _regain(frames: list[_Frame], below: int) -> None:
    """The descriptor of ``frames[-1]``, a level beyond those held, from ``below`` (the
    folder just left): its ``..`` if that is the recorded folder, else down again from
    the deepest held one by the recorded names and inodes. Levels that cannot be
    regained (renamed away meanwhile) are dropped with what they still held."""
    top = frames[-1]
    with contextlib.suppress(OSError):
        up = os.open("..", _DIR_FLAGS, dir_fd=below)
        if ident(os.fstat(up)) == top.ident:
            top.fd = up
            return
        os.close(up)
    held = max(i for i, f in enumerate(frames) if f.fd >= 0)
    fd = frames[held].fd
    for depth in range(held + 1, len(frames)):
        try:
            next_fd = open_dir_at(fd, frames[depth].names[-1], frames[depth].ident)
        except OSError:
            if depth - 1 > held:
                frames[depth - 1].fd = fd
            del frames[depth:]
            return
        if depth - 1 > held:
            os.close(fd)
        fd = next_fd
    top.fd = fd


def chown_tree(root: Path, uid: int, gid: int, *, owners: frozenset[int] | None) -> int:
    """Give ``root`` and every entry below it owned (user or group) by one of
    ``owners`` (``None``: every entry not already ``uid``:``gid``) to ``uid``:``gid``,
    links included and never followed; returns how many entries changed. A file of
    several links owned by root is never given away: it may be a link to one of the
    host's files."""

    def wanted(info: os.stat_result) -> bool:
        if (info.st_uid, info.st_gid) == (uid, gid):
            return False
        if uid != 0 and info.st_uid == 0 and info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
            return False
        return owners is None or info.st_uid in owners or info.st_gid in owners

    changed = 0
    fd = os.open(root, _DIR_FLAGS)
    try:
        if wanted(os.fstat(fd)):
            os.fchown(fd, uid, gid)
            changed += 1
        for entry in walk(fd, 1 << 62):
            if not wanted(entry.info):
                continue
            try:
                chown_at(entry.dir_fd, entry.names[-1], uid, gid)
                changed += 1
            except OSError as err:
                if err.errno not in (errno.ENOENT, errno.EXDEV, errno.ELOOP):
                    raise
    finally:
        os.close(fd)
    return changed
