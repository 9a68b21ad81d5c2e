"""Files bwrap writes into a command's read-only root, kept in memory once per worker.

Every bind mount costs bwrap a pass over ``/proc/self/mountinfo`` (to remount it
read-only, nosuid and nodev), and the table grows with each mount: the twenty-odd
``/etc`` entries of the :class:`~._spec.SystemView` were a third of a command's start.
So the regular files among them are written into the root (``--file``) like the
generated account files, from sealed in-memory copies the worker keeps: same bytes,
shown read-only (the root is remounted read-only, and a command has no capability,
mount call or nested namespace to change that).

A copy is only ever of what the command could read through the bind: a file
readable by others, behind folders others may search (a file only root or a group
may read stays a bind, its permissions checked as before). Before each command one
``stat`` per entry (and per folder above them) tells whether the host changed it
since it was read; a changed, appeared or vanished file is read (or dropped) again,
so a command sees the host's file as it is when the command starts. Folders stay
binds: a copy of one would have to look at every entry in it before each command,
which costs about what its bind does.
"""

from __future__ import annotations

import fcntl
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

#: Larger files stay binds (a copy is charged to each command's memory).
_COPY_MAX = 1 << 20
#: Sealed copies of generated files (account files) kept by content.
_GENERATED_MAX = 64
_SEALS = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL

#: What decides whether a copy is still the host's file: the file's identity, size,
#: times and mode, and the mode and owner of each folder above it.
_Key = tuple[tuple[int, ...], ...]


def sealed(content: bytes, name: str = "lw-root-file") -> int:
    """A sealed in-memory file holding ``content`` (close-on-exec)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.write(fd, content)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
    except BaseException:
        os.close(fd)
        raise
    return fd


def reopen(fd: int) -> int:
    """A descriptor of its own onto the sealed file ``fd`` (bwrap reads to the end)."""
    return os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)


@dataclass(frozen=True, slots=True)
class _Entry:
    key: _Key
    #: The sealed copy by path; ``None``: the entry is bound (a folder, a file others
    #: may not read, or too large) or, with ``missing``, absent.
    copies: tuple[tuple[int, str], ...] | None
    missing: bool = False


def _parents(path: str) -> list[str]:
    parts = path.split("/")[1:-1]
    return ["/" + "/".join(parts[:i]) for i in range(len(parts) + 1)]


def _own(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _key(path: str, folders_seen: dict[str, tuple[int, ...]]) -> tuple[_Key, os.stat_result | None]:
    """The stat key of ``path`` (following links, as bwrap's bind does) and its
    folders (each looked at once per command: ``folders_seen``); ``None`` for the
    result when it does not exist."""
    folders: list[tuple[int, ...]] = []
    for folder in _parents(path):
        seen = folders_seen.get(folder)
        if seen is None:
            try:
                st = os.stat(folder)
                seen = (st.st_dev, st.st_ino, st.st_mode, st.st_uid, st.st_gid)
            except OSError:
                seen = (-1,)
            folders_seen[folder] = seen
        if seen == (-1,):
            return ((-1,),), None
        folders.append(seen)
    try:
        st = os.stat(path)
    except OSError:
        return (*folders, (-1,)), None
    return (*folders, _own(st)), st


def _readable(st: os.stat_result) -> bool:
    """Whether it is a file others (the sandbox's uid is none of the host's) may read."""
    return stat.S_ISREG(st.st_mode) and bool(st.st_mode & stat.S_IROTH)


def _reachable(key: _Key) -> bool:
    """Whether every folder above the entry is searchable by others."""
    return all(folder[2] & stat.S_IXOTH for folder in key[:-1])


class RootFiles:
    """The worker's sealed copies: host ``/etc`` files by path, generated files by
    content. Thread-safe (commands start on the event loop and the spawner)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._host: dict[str, _Entry] = {}
        self._generated: OrderedDict[bytes, int] = OrderedDict()

    def host(self, paths: Sequence[str]) -> tuple[tuple[str, ...], list[tuple[int, str]]]:
        """For the host entries ``paths``: the ones to bind (in order) and, for the
        others that exist, a fresh descriptor of each copy by path (the caller closes
        them)."""
        bound: list[str] = []
        copies: list[tuple[int, str]] = []
        folders: dict[str, tuple[int, ...]] = {}
        with self._lock:
            try:
                for path in paths:
                    entry = self._fresh(path, folders)
                    if entry.copies is not None:
                        copies += [(reopen(fd), where) for fd, where in entry.copies]
                    elif not entry.missing:
                        bound.append(path)
            except BaseException:
                for fd, _ in copies:
                    os.close(fd)
                raise
        return tuple(bound), copies

    def _fresh(self, path: str, folders: dict[str, tuple[int, ...]]) -> _Entry:
        key, st = _key(path, folders)
        entry = self._host.get(path)
        if entry is not None and entry.key == key:
            return entry
        for old, _ in entry.copies or () if entry is not None else ():
            os.close(old)
        copies: tuple[tuple[int, str], ...] | None = None
        if st is not None and _reachable(key) and _readable(st) and st.st_size <= _COPY_MAX:
            fd = _read_copy(path, st)
            copies = None if fd is None else ((fd, path),)
        entry = _Entry(key, copies, missing=st is None)
        self._host[path] = entry
        return entry

    def generated(self, content: bytes) -> int:
        """A fresh descriptor of a sealed file holding ``content``."""
        with self._lock:
            fd = self._generated.get(content)
            if fd is None:
                fd = self._generated[content] = sealed(content, "lw-etc")
                while len(self._generated) > _GENERATED_MAX:
                    os.close(self._generated.popitem(last=False)[1])
            else:
                self._generated.move_to_end(content)
            return reopen(fd)


def _read_copy(path: str, st: os.stat_result) -> int | None:
    """A sealed copy of ``path``, or ``None`` (it stays a bind) when what was read is
    not the file as it was checked: replaced, rewritten or made private meanwhile (the
    worker reads as root, so a copy of bytes written after a ``chmod o-r`` would show
    what the bind would refuse; the next command looks again)."""
    try:
        with open(path, "rb") as source:
            content = source.read(_COPY_MAX + 1)
            if _own(os.fstat(source.fileno())) != _own(st):
                return None
    except OSError:
        return None
    if len(content) > _COPY_MAX:
        return None
    return sealed(content)


_FILES = RootFiles()


def root_files() -> RootFiles:
    """This worker's copies (one per process)."""
    return _FILES
