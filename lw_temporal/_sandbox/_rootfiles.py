"""Files bwrap writes into a command's read-only root, kept in memory once per worker.

Every bind mount costs bwrap a pass over ``/proc/self/mountinfo`` (to remount it
read-only, nosuid and nodev), and the table grows with each mount: the twenty-odd
``/etc`` entries of the :class:`~._spec.SystemView` were a third of a command's start.
So the regular files among them are written into the root (``--file``) like the
generated account files, from sealed in-memory copies the worker keeps: same bytes,
shown read-only (the root is remounted read-only, and a command has no capability,
mount call or nested namespace to change that).

A copy is only ever of what the command could read through the bind, which bwrap
makes (and the command reads) as the command's uid, while the worker reads the copy
as root: a file every class may read (owner, group, others), with no access ACL,
whose lookup (the folders of every link's target included) passes only folders every
class may search and that have no ACL either. Anything else (a file only root or a
group may read, one behind a private folder or a link into one) stays a bind, its
permissions checked as before. Before each command one ``stat`` per entry (and one
look per folder and link on its way) tells whether the host changed it since it was
read; a changed, appeared or vanished file is read (or dropped) again, so a command
sees the host's file as it is when the command starts. Folders stay
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
from dataclasses import dataclass, field

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


def _own(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _folder(st: os.stat_result) -> tuple[int, ...]:
    # ctime: an ACL given to the folder (or its owner or mode changed) shows there.
    return (st.st_dev, st.st_ino, st.st_mode, st.st_uid, st.st_gid, st.st_ctime_ns)


_GONE: tuple[int, ...] = (-1,)


@dataclass(slots=True)
class _Seen:
    """What one command's look at the entries found (each path looked at once)."""

    stats: dict[str, os.stat_result | None] = field(default_factory=dict)
    folders: dict[str, tuple[int, ...]] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)

    def lstat(self, path: str) -> os.stat_result | None:
        try:
            return self.stats[path]
        except KeyError:
            pass
        try:
            found: os.stat_result | None = os.lstat(path)
        except OSError:
            found = None
        self.stats[path] = found
        return found

    def folder(self, path: str, st: os.stat_result) -> tuple[int, ...]:
        found = self.folders.get(path)
        if found is None:
            found = self.folders[path] = _folder(st)
        return found

    def link(self, path: str) -> str:
        found = self.links.get(path)
        if found is None:
            try:
                found = os.readlink(path)
            except OSError:
                found = ""
            self.links[path] = found
        return found


def _resolve(path: str, seen: _Seen) -> tuple[list[tuple[int, ...]], os.stat_result | None, str]:
    """Every folder a lookup of ``path`` searches, links followed as the kernel follows
    them (the folders of each link's target included: the command's uid must be able to
    search them for its bind to be made), the stat of what it resolves to (``None``: it
    does not exist, or its links loop) and that path. One ``lstat`` per entry and per
    folder on its way (once per command); a ``readlink`` only where a link is."""
    folders: list[tuple[int, ...]] = []
    parts = path.split("/")[::-1]
    current = "/"
    st = seen.lstat(current)
    hops = 0
    while parts:
        name = parts.pop()
        if name in ("", "."):
            continue
        if st is None or not stat.S_ISDIR(st.st_mode):
            return [*folders, _GONE], None, path
        folders.append(seen.folder(current, st))
        if name == "..":
            current = os.path.dirname(current)
            st = seen.lstat(current)
            continue
        step = f"{current}/{name}" if current != "/" else f"/{name}"
        st = seen.lstat(step)
        if st is None or not stat.S_ISLNK(st.st_mode):
            current = step
            continue
        hops += 1
        link = seen.link(step)
        if hops > 40 or not link:
            return [*folders, _GONE], None, path
        parts += link.split("/")[::-1]
        if link.startswith("/"):
            current = "/"
        st = seen.lstat(current)
    if st is None:
        return [*folders, _GONE], None, path
    return folders, st, current


def _key(path: str, seen: _Seen) -> tuple[_Key, os.stat_result | None, str]:
    """The stat key of ``path`` and of every folder its lookup searches (see
    :func:`_resolve`), the file's stat (``None`` when it does not exist) and the path
    it resolves to."""
    folders, st, resolved = _resolve(path, seen)
    if st is None:
        return (*folders,), None, path
    return (*folders, _own(st)), st, resolved


def _acl(path: str) -> bool:
    """Whether ``path`` has an access ACL (a named user or group it may refuse)."""
    try:
        os.getxattr(path, "system.posix_acl_access", follow_symlinks=False)
    except OSError:
        return False
    return True


def _readable(st: os.stat_result) -> bool:
    """Whether it is a file every class may read: the command's uid and groups are
    none of the host's files' owners and groups in practice, but if they were, the
    owner's or the group's bits would decide."""
    return stat.S_ISREG(st.st_mode) and st.st_mode & 0o444 == 0o444


def _reachable(key: _Key) -> bool:
    """Whether every class may search every folder the lookup passes."""
    return all(folder[2] & 0o111 == 0o111 for folder in key[:-1])


def _folders_without_acl(path: str) -> bool:
    """Whether no folder of ``path``'s lookup has an access ACL (looked at only when a
    copy is made: an ACL given later changes the folder's ctime, so its key)."""
    seen = _Seen()
    _resolve(path, seen)
    return not any(_acl(folder) for folder in seen.folders)


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
        folders = _Seen()
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

    def _fresh(self, path: str, folders: _Seen) -> _Entry:
        key, st, resolved = _key(path, folders)
        entry = self._host.get(path)
        if entry is not None and entry.key == key:
            return entry
        for old, _ in entry.copies or () if entry is not None else ():
            os.close(old)
        copies: tuple[tuple[int, str], ...] | None = None
        if (
            st is not None
            and _reachable(key)
            and _readable(st)
            and st.st_size <= _COPY_MAX
            and not _acl(resolved)
            and _folders_without_acl(path)
        ):
            fd = _read_copy(resolved, st)
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
    """A sealed copy of ``path`` (resolved: no link), or ``None`` (it stays a bind) when
    what was read is not the file as it was checked: replaced, rewritten or made
    private meanwhile (the worker reads as root, so a copy of bytes written after a
    ``chmod o-r`` would show what the bind would refuse; the next command looks
    again). Opened without blocking (a fifo or device put in its place while it was
    looked at is not waited on) and only kept when it holds as many bytes as its
    size says (not a ``/proc`` file, whose size says nothing)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        if _own(os.fstat(fd)) != _own(st):
            return None
        content = _read_all(fd, _COPY_MAX + 1)
        if _own(os.fstat(fd)) != _own(st):
            return None
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(content) != st.st_size:
        return None
    return sealed(content)


def _read_all(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


_FILES = RootFiles()


def root_files() -> RootFiles:
    """This worker's copies (one per process)."""
    return _FILES
