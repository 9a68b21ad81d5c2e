"""The files a native tool reads and changes: memory through the stores, scratch in place.

Memory goes through :class:`MemoryStores` only, so an edit made with the memory tool
or the text editor is versioned, audited with the calling activity's provenance,
scanned, within quota and exactly-once under retry, like one made with
``memory_write`` or bash. An edit is compare-and-set against what the command read:
nothing written in between is overwritten.

Scratch is plain files in the agent's own folder, which its commands also write. The
worker touches them without ever following a link (every component is opened with
``O_NOFOLLOW`` below the mount's root), so a link the agent planted cannot point it
elsewhere; what it creates belongs to the sandbox user, as if a command had made it.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import threading
import uuid
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from temporalio.exceptions import ApplicationError

from .._sandbox import SandboxUser
from .._scope import Scope
from ..errors._kinds import MEMORY_CONFLICT
from ..memory import _fs
from ..memory._held import Viewed
from ..memory._records import ABSENT, Provenance
from ..memory._stores import MemoryStores
from ._once import ScratchOnce
from ._paths import Place, ToolError

#: Bytes of a file a command reads or writes whole (memory files are bounded by their
#: store's per-file quota first).
FILE_CAP = 8 * 1024 * 1024
#: Entries of one folder view.
LIST_CAP = 500
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

Kind = Literal["file", "dir"]


@dataclass(frozen=True, slots=True)
class Entry:
    virtual: PurePosixPath
    kind: Kind
    size: int


@dataclass(frozen=True, slots=True)
class Text:
    text: str
    sha: str


class Exists(Exception):
    """A create found the name taken."""


class Changed(Exception):
    """A compare-and-set write found the file changed since it was read."""


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _decode(data: bytes, shown: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{shown} is not UTF-8 text; inspect it with bash (od -c, file)") from None


class Files:
    """One command's access to the agent's files: its scope, the stores, who it is."""

    def __init__(
        self,
        scope: Scope,
        stores: MemoryStores,
        provenance: Provenance,
        user: SandboxUser | None,
        cancel: threading.Event,
    ) -> None:
        self.scope = scope
        self.stores = stores
        self.provenance = provenance
        self.user = user
        self.cancel = cancel
        self._once = ScratchOnce(
            scope.layout.conversations.joinpath(*scope.agent_id.segments), provenance
        )

    # -- reading ----------------------------------------------------------------------
    def _root(self, place: Place) -> Path:
        assert place.mount is not None
        return place.mount.real

    def kind(self, place: Place) -> Kind | None:
        if place.mount is None or not place.parts:
            return "dir"
        if (viewed := self._held_view(place)) is not None:
            return viewed.kind
        root_fd = _fs.open_root(self._root(place), create=False, shown=place.shown)
        if root_fd is None:
            return None
        try:
            with _fs.opened_dir(root_fd, place.parts[:-1], create=False, shown=place.shown) as fd:
                found = None if fd is None else _fs.kind_at(fd, place.parts[-1])
        finally:
            os.close(root_fd)
        if found == "link":
            raise ToolError(f"{place.shown} is a symbolic link; it is never followed")
        if found == "other":
            raise ToolError(f"{place.shown} is not a regular file or folder")
        return "file" if found == "file" else "dir" if found == "dir" else None

    def read(self, place: Place) -> Text | None:
        """The whole text of a file (``None`` if absent)."""
        if place.mount is None or not place.parts:
            raise ToolError(f"{place.shown} is a directory")
        text = self._read(place)
        if text is not None and self.stores.gate is not None and place.mount.store is not None:
            self.stores.gate.saw(self.scope, place.mount, [place.rel])
        return text

    def _held_view(self, place: Place) -> Viewed | None:
        """``place`` in the run's held changes, when it is tainted and holds some for
        the store (``None``: the store as it is)."""
        gate = self.stores.gate
        if gate is None or place.mount is None or place.mount.store is None:
            return None
        held = gate.held_for(self.scope, place.mount.store)
        current = None if held is None else held.load()
        if held is None or current is None:
            return None
        return held.view(current, "/".join(place.parts))

    def _read(self, place: Place) -> Text | None:
        assert place.mount is not None
        if (viewed := self._held_view(place)) is not None:
            if viewed.kind == "dir":
                raise ToolError(f"{place.shown} is a directory")
            if viewed.content is None:
                return None
            return Text(_decode(viewed.content, place.shown), viewed.sha or "")
        root_fd = _fs.open_root(self._root(place), create=False, shown=place.shown)
        if root_fd is None:
            return None
        try:
            with _fs.opened_dir(root_fd, place.parts[:-1], create=False, shown=place.shown) as fd:
                opened = None if fd is None else _fs.open_file_at(fd, place.parts[-1], place.shown)
                if opened is None:
                    return None
                file, info = opened
                try:
                    if info.st_size > FILE_CAP:
                        raise ToolError(
                            f"{place.shown} is {info.st_size} bytes, more than this "
                            f"tool reads whole ({FILE_CAP}); read it in parts with bash "
                            "(sed -n, head -c)"
                        )
                    data = _fs.read_fd(file)
                finally:
                    os.close(file)
        finally:
            os.close(root_fd)
        return Text(_decode(data, place.shown), _sha(data))

    def listing(self, place: Place, depth: int = 2) -> tuple[list[Entry], bool]:
        """What lies below a folder, ``depth`` levels deep, hidden names left out;
        the flag says the view was cut at LIST_CAP entries."""
        entries: list[Entry] = []
        if place.mount is not None:
            return self._walk(place, depth, entries)
        cut = False
        for mount in sorted(self.scope.mounts, key=lambda m: str(m.virtual)):
            if place.virtual not in mount.virtual.parents:
                continue
            below = mount.virtual.relative_to(place.virtual).parts
            if len(below) > depth:
                continue
            for i in range(1, len(below) + 1):
                folder = place.virtual.joinpath(*below[:i])
                if all(e.virtual != folder for e in entries):
                    entries.append(Entry(folder, "dir", 0))
            inner = Place(place.show(mount.virtual), mount.virtual, mount, "", place.alias)
            _, cut = self._walk(inner, depth - len(below), entries)
            if cut:
                break
        return entries, cut

    def _walk(self, place: Place, depth: int, entries: list[Entry]) -> tuple[list[Entry], bool]:
        start = len(entries)
        found = self._walk_view(place, depth, entries)
        gate, mount = self.stores.gate, place.mount
        if gate is not None and mount is not None and mount.store is not None:
            gate.saw(self.scope, mount, [str(e.virtual.relative_to(mount.virtual))
                                         for e in entries[start:]])  # fmt: skip
        return found

    def _walk_view(
        self, place: Place, depth: int, entries: list[Entry]
    ) -> tuple[list[Entry], bool]:
        gate, mount = self.stores.gate, place.mount
        held = None
        if gate is not None and mount is not None and mount.store is not None:
            held = gate.held_for(self.scope, mount.store)
        current = None if held is None else held.load()
        if held is not None and current is not None:
            return entries, _held_walk(held.files_below(current, place.rel), place, depth, entries)
        root_fd = _fs.open_root(self._root(place), create=False, shown=place.shown)
        if root_fd is None:
            return entries, False
        try:
            start = _fs.open_dir(root_fd, place.parts, create=False, shown=place.shown)
        finally:
            os.close(root_fd)
        if start is None:
            return entries, False
        return entries, _walk_dir(start, place.virtual, depth, entries)

    # -- changing -----------------------------------------------------------------------
    def create(self, place: Place, text: str) -> None:
        """A new file; :class:`Exists` if the name is taken."""
        self._put(place, text.encode("utf-8"), None)

    def write(self, place: Place, text: str, read: Text) -> None:
        """Replace the file's content if it is still what ``read`` saw; :class:`Changed`
        if another writer got there first."""
        self._put(place, text.encode("utf-8"), read.sha)

    def replace(self, place: Place, text: str, read: Text, old: str, new: str) -> None:
        """:meth:`write` of a ``str_replace`` (``text`` is the edited content): memory
        records it as the store's own ``replace``."""
        assert place.mount is not None
        if place.mount.store is None:
            self.write(place, text, read)
            return
        try:
            self.stores.replace(
                place.mount.store, place.rel, old, new, provenance=self.provenance,
                if_sha256=read.sha, shown=place.shown, cancel=self.cancel,
            )  # fmt: skip
        except ApplicationError as err:
            if err.type == MEMORY_CONFLICT:
                raise Changed() from None
            raise

    def _put(self, place: Place, data: bytes, expected: str | None) -> None:
        assert place.mount is not None
        if place.mount.store is not None:
            try:
                self.stores.write(
                    place.mount.store, place.rel, data, provenance=self.provenance,
                    if_sha256=expected or ABSENT, shown=place.shown, cancel=self.cancel,
                )  # fmt: skip
            except ApplicationError as err:
                if err.type == MEMORY_CONFLICT:
                    raise Exists() if expected is None else Changed() from None
                raise
            return
        if len(data) > FILE_CAP:
            raise ToolError(
                f"{place.shown} would be {len(data)} bytes, more than this tool "
                f"writes ({FILE_CAP}); write large files with bash"
            )
        with self._once.putting(place, data):
            if expected is not None:
                # compare-and-set, as in memory: a write over a change made since
                # the read (another call, a command) would lose it
                current = self._read(place)
                if current is None or current.sha != expected:
                    raise Changed()
            _scratch_put(
                self._root(place), place.parts, data, self.user, exclusive=expected is None
            )

    def delete(self, place: Place) -> None:
        assert place.mount is not None and place.mount.store is not None
        self.stores.delete(
            place.mount.store, place.rel, provenance=self.provenance, recursive=True,
            shown=place.shown, cancel=self.cancel,
        )  # fmt: skip

    def rename(self, old: Place, new: Place) -> None:
        assert old.mount is not None and old.mount.store is not None
        self.stores.rename(
            old.mount.store, old.rel, new.rel, provenance=self.provenance, shown=old.shown,
            new_shown=new.shown, cancel=self.cancel,
        )  # fmt: skip

    def already_done(self, place: Place) -> bool:
        """Whether an earlier attempt of this activity already made its change (a retry
        must not apply an edit twice): the store's ledger says so for memory, the
        run's note and the file's content for scratch (:mod:`._once`)."""
        if place.mount is None:
            return False
        if place.mount.store is not None:
            return self.stores.recorded(place.mount.store, self.provenance) is not None
        noted = self._once.noted(place)
        if noted is None or self._held_view(place) is not None:
            return False
        current = self._read(place)
        return current is not None and current.sha == noted


def _held_walk(
    below: list[tuple[str, str, int]], place: Place, depth: int, entries: list[Entry]
) -> bool:
    """:func:`_walk_dir` over a run's held view (``below``: its paths under the place)."""
    base = len(place.parts)
    for path, kind, size in below:
        parts = path.split("/")[base:]
        if not parts or len(parts) > depth or any(p.startswith(".") for p in parts):
            continue
        if kind not in ("file", "dir"):
            continue
        if len(entries) >= LIST_CAP:
            return True
        entries.append(Entry(place.virtual.joinpath(*parts), "file" if kind == "file" else "dir",
                             size if kind == "file" else 0))  # fmt: skip
    return False


def _walk_dir(fd: int, folder: PurePosixPath, depth: int, entries: list[Entry]) -> bool:
    """Add what is below ``fd`` (closed here), ``depth`` levels, each folder before its
    contents; ``True`` once LIST_CAP entries were reached."""
    try:
        for name, kind, size in _scan(fd) if depth > 0 else []:
            if len(entries) >= LIST_CAP:
                return True
            entries.append(Entry(folder / name, kind, size))
            child = _open_child(fd, name) if kind == "dir" and depth > 1 else None
            if child is not None and _walk_dir(child, folder / name, depth - 1, entries):
                return True
    finally:
        os.close(fd)
    return False


def _scan(fd: int) -> list[tuple[str, Kind, int]]:
    found: list[tuple[str, Kind, int]] = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.name.startswith("."):
                continue
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                found.append((entry.name, "dir", 0))
            elif stat.S_ISREG(info.st_mode):
                found.append((entry.name, "file", info.st_size))
    found.sort()
    return found


def _open_child(fd: int, name: str) -> int | None:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=fd)
    except OSError:
        return None  # gone, or replaced by a link since it was listed


def _scratch_put(
    root: Path, parts: tuple[str, ...], data: bytes, user: SandboxUser | None, *, exclusive: bool
) -> None:
    """Write a scratch file atomically, never through a link, owned by the sandbox user;
    with ``exclusive``, FileExistsError if the name is taken."""
    if not root.is_dir():
        root.mkdir(parents=True, exist_ok=True)
        if user is not None:
            user.own(root)  # the agent's own scratch, as lw.bash leaves it
    fd = os.open(root, _DIR_FLAGS)
    try:
        for name in parts[:-1]:
            fd = _enter(fd, name, user)
        tmp = f"{_fs.TMP_PREFIX}{uuid.uuid4().hex}"
        out = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
            dir_fd=fd,
        )  # fmt: skip
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(out, view) :]
            if user is not None:
                os.fchown(out, user.uid, user.gid)
        finally:
            os.close(out)
        try:
            if exclusive:
                os.link(tmp, parts[-1], src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
            else:
                os.rename(tmp, parts[-1], src_dir_fd=fd, dst_dir_fd=fd)
        except FileExistsError:
            raise Exists() from None
        except IsADirectoryError:
            raise ToolError(f"{parts[-1]} is a directory") from None
        finally:
            with suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=fd)  # still there after a link, or a failure
    finally:
        os.close(fd)


def save_once(root: Path, parts: tuple[str, ...], data: bytes) -> bool:
    """Put a new file below ``root`` (an agent's own scratch) for the worker's own
    purposes, never through a link or over a file the agent made there: ``False`` when
    a folder on the way is not a folder; an existing name is kept as it is."""
    if _present(root, parts):
        return True
    try:
        _scratch_put(root, parts, data, None, exclusive=True)
    except Exists:
        pass
    except (ToolError, OSError):
        return False
    return True


def _present(root: Path, parts: tuple[str, ...]) -> bool:
    """Whether ``parts`` names something below ``root`` already, through folders only."""
    try:
        fd = os.open(root, _DIR_FLAGS)
    except OSError:
        return False
    try:
        for name in parts[:-1]:
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
        os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def _enter(fd: int, name: str, user: SandboxUser | None) -> int:
    """The folder ``name`` below ``fd`` (made, as the sandbox user's, if absent); the
    caller's ``fd`` is closed."""
    try:
        try:
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            os.mkdir(name, 0o755, dir_fd=fd)
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            if user is not None:
                os.fchown(child, user.uid, user.gid)
        except OSError as err:
            if err.errno in (errno.ELOOP, errno.ENOTDIR):
                raise ToolError(
                    f"{name!r} is a link or a file, not a folder; it is never followed"
                ) from None
            raise
    finally:
        os.close(fd)
    return child
