"""File access beneath a store root that never follows a link.

Every path is walked one component at a time with ``openat``-style calls and
``O_NOFOLLOW``: a symbolic link planted anywhere on the way (by a bash command, say)
is refused rather than followed, so no name inside a store can reach outside it.
"""

from __future__ import annotations

import errno
import os
import stat
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from .._changes import CONTROL_CHARS
from ..errors._kinds import INVALID_REQUEST, PATH_REJECTED, lw_error

#: Names of in-flight temporary files; never valid as a memory path segment.
TMP_PREFIX = ".lw-tmp-"
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 4096

#: Control characters, which no memory name may hold (see :mod:`.._changes`).
CONTROL = _CONTROL = CONTROL_CHARS
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def clean_relative(rel: str, shown: str) -> tuple[str, ...]:
    """Split a store-relative path into segments, refusing anything that could leave
    the store (``..``, absolute paths, NUL) or collide with our temporary files."""
    if "\x00" in rel:
        raise lw_error(PATH_REJECTED, f"{shown}: path contains a NUL byte")
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        raise lw_error(
            PATH_REJECTED,
            f"{shown!r}: path is not valid UTF-8; memory keeps UTF-8 names only, rename it",
        ) from None
    if _CONTROL.search(rel):
        raise lw_error(
            PATH_REJECTED,
            f"{shown!r}: path contains a control character (newline, tab, escape, a bidi "
            "or line separator mark...); rename it with printable characters",
        )
    if len(rel.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES:
        raise lw_error(PATH_REJECTED, f"{shown}: path is longer than {MAX_PATH_BYTES} bytes")
    if rel.startswith("/"):
        raise lw_error(
            PATH_REJECTED, f"{shown}: expected a path relative to the store root, got {rel!r}"
        )
    parts = tuple(p for p in rel.split("/") if p not in ("", "."))
    for part in parts:
        if part == "..":
            raise lw_error(
                PATH_REJECTED,
                f"{shown}: '..' is not allowed in memory paths; name the file from the "
                "mount root instead",
            )
        if len(part.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
            raise lw_error(PATH_REJECTED, f"{shown}: segment longer than {MAX_NAME_BYTES} bytes")
        if part.startswith(TMP_PREFIX):
            raise lw_error(PATH_REJECTED, f"{shown}: names starting {TMP_PREFIX!r} are reserved")
    return parts


def _link_error(shown: str, name: str) -> Exception:
    return lw_error(
        PATH_REJECTED,
        f"{shown}: {name!r} is a symbolic link; memory paths never follow links. "
        "Remove the link and write the file itself",
    )


def is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


def open_root(root: Path, *, create: bool, shown: str) -> int | None:
    """An fd on the store root, made (lazily) when ``create``; ``None`` if absent. A
    new root is closed to others (``0750``): only agents that mount the store enter
    it, through its group (see ``lw.bash``'s per-agent ids)."""
    try:
        return os.open(root, _DIR_FLAGS)
    except FileNotFoundError:
        if not create:
            return None
        root.parent.mkdir(parents=True, exist_ok=True)
        with suppress(FileExistsError):
            os.mkdir(root, 0o750)
        return os.open(root, _DIR_FLAGS)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):
            raise lw_error(
                PATH_REJECTED, f"{shown}: the store root {root.name!r} is not a plain directory"
            ) from None
        raise


def open_dir(root_fd: int, parts: tuple[str, ...], *, create: bool, shown: str) -> int | None:
    """Walk ``parts`` below ``root_fd`` without following links; ``None`` if a
    directory is missing and not ``create``. The caller closes the returned fd."""
    fd = os.dup(root_fd)
    try:
        for name in parts:
            try:
                next_fd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    os.close(fd)
                    return None
                with suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=fd)
                next_fd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as err:
                if err.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                if is_link(fd, name):
                    raise _link_error(shown, name) from None
                raise lw_error(
                    INVALID_REQUEST, f"{shown}: {name!r} is a file, not a directory"
                ) from None
            os.close(fd)
            fd = next_fd
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def opened_dir(
    root_fd: int, parts: tuple[str, ...], *, create: bool, shown: str
) -> Iterator[int | None]:
    fd = open_dir(root_fd, parts, create=create, shown=shown)
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


def read_at(dir_fd: int, name: str, shown: str) -> bytes | None:
    """The file's bytes, ``None`` if it does not exist; links and directories refused."""
    opened = open_file_at(dir_fd, name, shown)
    if opened is None:
        return None
    fd, _ = opened
    try:
        return read_fd(fd)
    finally:
        os.close(fd)


def open_file_at(dir_fd: int, name: str, shown: str) -> tuple[int, os.stat_result] | None:
    """An fd on the regular file ``name`` and its stat, ``None`` if it does not
    exist; links, folders and other kinds are refused. The caller closes the fd.
    Opened without blocking: a fifo an agent left in its scratch would otherwise hold
    the worker's thread until something writes to it (a regular file reads the same)."""
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd
        )
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise _link_error(shown, name) from None
        raise
    info = os.fstat(fd)
    if stat.S_ISREG(info.st_mode):
        return fd, info
    os.close(fd)
    if stat.S_ISDIR(info.st_mode):
        raise lw_error(INVALID_REQUEST, f"{shown}: is a directory, not a file")
    raise lw_error(PATH_REJECTED, f"{shown}: is not a regular file")


def read_fd(fd: int) -> bytes:
    chunks: list[bytes] = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def kind_at(dir_fd: int, name: str) -> str | None:
    """``"file"``, ``"dir"``, ``"link"``, ``"other"`` or ``None`` (absent), not following."""
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "link"
    return "other"


def write_atomic_at(
    dir_fd: int, name: str, data: bytes, *, sync_dir: bool = True, sync: bool = True
) -> None:
    """Replace ``name`` with ``data`` atomically: temp file in the same directory,
    fsync, rename over, fsync the directory. Readers see the old or the new bytes.
    Without ``sync`` nothing is flushed (for what the journal can redo)."""
    tmp = f"{TMP_PREFIX}{uuid.uuid4().hex}"
    fd = os.open(
        tmp,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o644,
        dir_fd=dir_fd,
    )
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if sync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.close(fd)
    try:
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        os.unlink(tmp, dir_fd=dir_fd)
        raise
    if sync_dir and sync:
        os.fsync(dir_fd)


def write_atomic(path: Path, data: bytes, *, sync: bool = True) -> None:
    """:func:`write_atomic_at` for bookkeeping files under the state dir."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.parent, _DIR_FLAGS)
    try:
        write_atomic_at(fd, path.name, data, sync=sync)
    finally:
        os.close(fd)


def write_redoable(path: Path, data: bytes) -> None:
    """Rewrite a bookkeeping file in place: no temp file, no rename, no fsync, and
    never shorter (the rest is padded with spaces, which JSON ignores), since freeing
    blocks costs more than the write.

    Only for what the journal can write again (index entries, ledger records, version
    references, counters): a crash mid-write leaves the journal unapplied, and
    recovery rewrites the file; every reader treats an unreadable one as missing.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, flags, 0o644)
    try:
        size = os.fstat(fd).st_size
        view = memoryview(data.ljust(size) if size > len(data) else data)
        offset = 0
        while view:
            n = os.pwrite(fd, view, offset)
            view, offset = view[n:], offset + n
    finally:
        os.close(fd)


def fsync_path(path: Path) -> None:
    """Flush a bookkeeping file (or folder) if it exists."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, _DIR_FLAGS)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def walk_files(
    dir_fd: int, prefix: str, *, recursive: bool = True
) -> Iterator[tuple[str, str, int]]:
    """``(relative path, kind, size)`` of everything below ``dir_fd``, pre-order
    (a directory before its contents, names sorted); links are reported, never
    entered. Iterative, with one descriptor of its own open at a time (it climbs back
    through ``..``): a tree of any depth (one planted on disk) lists without running
    out of stack or descriptors."""
    fd = os.dup(dir_fd)
    levels = [(prefix, _entries(fd))]
    try:
        while levels:
            base, pending = levels[-1]
            if not pending:
                levels.pop()
                if levels:
                    parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
                    os.close(fd)
                    fd = parent
                continue
            name, kind, size = pending.pop()
            rel = f"{base}{name}"
            yield rel, kind, size
            if kind != "dir" or not recursive:
                continue
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
            levels.append((rel + "/", _entries(fd)))
    finally:
        os.close(fd)


def _entries(dir_fd: int) -> list[tuple[str, str, int]]:
    """A folder's entries as ``(name, kind, size)``, last name first (popped in order)."""
    found: list[tuple[str, str, int]] = []
    with os.scandir(dir_fd) as entries:
        for entry in entries:
            if entry.name.startswith(TMP_PREFIX):
                continue
            if entry.is_symlink():
                found.append((entry.name, "link", 0))
            elif entry.is_dir(follow_symlinks=False):
                found.append((entry.name, "dir", 0))
            elif entry.is_file(follow_symlinks=False):
                found.append((entry.name, "file", entry.stat(follow_symlinks=False).st_size))
            else:
                found.append((entry.name, "other", 0))
    found.sort(key=lambda item: item[0], reverse=True)
    return found
