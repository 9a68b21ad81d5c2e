"""Quotas on what a command may leave in its writable folders (scratch, ``TMPDIR``).

No file system here gives a per-folder quota for free (project quotas need an XFS or
ext4 mount option; a loop device or a tmpfs per agent costs more than the sandbox),
so the quota is kept in three steps, each sound on its own terms:

* ``RLIMIT_FSIZE`` bounds every single file the command writes (the kernel's, exact);
* while the command runs, its folders are measured (after a quarter second, then
  every half second or so; allocated blocks, so sparse files count what they hold,
  and entries, so 50,000 empty folders count too) and a command over a quota is
  stopped: it may overshoot by what it writes between two measurements, never more;
* when it has ended (nothing of it is left running), the folders are measured once
  more and what the command added past the quota is removed: the largest files it
  wrote (changed at or after its start, by the kernel's ``ctime``, which a command
  cannot set back), then the newest folders, until the folder is under its quota. A
  folder is removed whole only when nothing in it is older than the command (a folder
  holding older files has a new ``ctime`` too once anything in it changed), and every
  removal goes by descriptor and inode (:mod:`._tree`), so a command of the same agent
  renaming folders meanwhile cannot steer it to anything older.

What it does not give: a quota across commands that run at the same time in the same
folder (each sees the other's bytes, so together they stay within roughly one quota
plus one overshoot each), and no bound between two measurements beyond
``RLIMIT_FSIZE`` times the files written in that interval (a tmpfs ``TMPDIR`` is also
bounded, hard, by the command's memory cgroup: its pages are charged there). The walk
is iterative and descriptor-relative (any depth, any path length, symlinks never
followed) and stops at a bound, so measuring cannot be made to take forever.
"""

from __future__ import annotations

import asyncio
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .._mode import Mode
from ._spec import SandboxSpec
from ._tree import Ident, ident, open_dir_at, remove_at, walk

if TYPE_CHECKING:
    from ._backends import Launch

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class FolderQuota:
    folder: Path
    #: How results name the folder (the command's own name for it).
    label: str
    max_bytes: int
    max_entries: int
    #: Whether what the command added past the quota is removed afterwards (not for
    #: a ``TMPDIR`` that is removed whole anyway).
    trim: bool = True

    def over(self, used: int, entries: int) -> str | None:
        if used > self.max_bytes:
            return f"holds {_mib(used)} on disk, over its quota of {_mib(self.max_bytes)}"
        if entries > self.max_entries:
            return f"holds {entries:,} files and folders, over its quota of {self.max_entries:,}"
        return None


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def _walk(root: Path, limit: int) -> Iterator[tuple[tuple[str, ...], os.stat_result]]:
    """Every entry below ``root`` (its name components and ``lstat``), at most
    ``limit`` of them, by descriptor (see :mod:`._tree`)."""
    try:
        fd = os.open(root, _DIR_FLAGS)
    except OSError:
        return
    try:
        for entry in walk(fd, limit):
            yield entry.names, entry.info
    finally:
        os.close(fd)


def measure(quota: FolderQuota) -> tuple[int, int]:
    """(bytes on disk, entries) below the folder, counting a hard-linked file once;
    the walk stops one entry past the entry quota."""
    used = entries = 0
    linked: set[tuple[int, int]] = set()
    for _, info in _walk(quota.folder, quota.max_entries + 1):
        entries += 1
        if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
            key = (info.st_dev, info.st_ino)
            if key in linked:
                continue
            linked.add(key)
        used += info.st_blocks * 512
    return used, entries


def _small_and_under(quota: FolderQuota, small: int = 64) -> bool:
    used = entries = 0
    for _, info in _walk(quota.folder, small):
        entries += 1
        used += info.st_blocks * 512
    return entries < small and quota.over(used, entries) is None


def trim(quota: FolderQuota, since_ns: int) -> tuple[int, int]:
    """Remove what was added at or after ``since_ns`` until the folder is under its
    quota; returns (files and folders removed, bytes freed). A measure stops at the
    entry quota, so a pass may leave the folder over: a few passes finish it."""
    removed = freed = 0
    for _ in range(4):
        if quota.over(*measure(quota)) is None:
            break
        more, bytes_freed = _trim_pass(quota, since_ns)
        if not more:
            break
        removed, freed = removed + more, freed + bytes_freed
    return removed, freed


def _trim_pass(quota: FolderQuota, since_ns: int) -> tuple[int, int]:
    found = list(_walk(quota.folder, max(4 * quota.max_entries, 200_000)))
    used = entries = 0
    # Folders holding something older than the command: changed since (a folder's
    # change time moves with every entry made, removed or renamed in it) but never
    # removed whole, only what is new inside them.
    older: set[tuple[str, ...]] = set()
    for names, info in found:
        entries += 1
        used += info.st_blocks * 512
        if info.st_ctime_ns < since_ns:
            parent = names[:-1]
            while parent and parent not in older:
                older.add(parent)
                parent = parent[:-1]
    # Each new entry's topmost wholly new ancestor (itself when its folder is not),
    # and what each such top holds (entries, bytes): removing a top removes all that.
    top_of: dict[tuple[str, ...], tuple[str, ...]] = {}
    held: dict[tuple[str, ...], list[int]] = {}
    idents: dict[tuple[str, ...], Ident] = {}
    for names, info in found:
        if info.st_ctime_ns < since_ns or names in older:
            continue
        top = top_of.get(names[:-1], names)
        if top == names:
            idents[names] = ident(info)
        if stat.S_ISDIR(info.st_mode):
            top_of[names] = top
        count = held.setdefault(top, [0, 0])
        count[0] += 1
        count[1] += info.st_blocks * 512
    removed = freed = 0
    # The largest first: by bytes while over the byte quota, then by entries.
    for key in (1, 0):
        for names, count in sorted(held.items(), key=lambda item: -item[1][key]):
            if (used <= quota.max_bytes) if key else (entries <= quota.max_entries):
                break
            if count[0] and _remove(quota.folder, names, idents[names]):
                used -= count[1]
                entries -= count[0]
                freed += count[1]
                removed += count[0]
                count[0] = 0
    return removed, freed


def _remove(root: Path, names: tuple[str, ...], expect: Ident) -> bool:
    """Remove ``root/names...`` if it is still the entry ``expect`` (device and inode)
    the measurement judged new: folders on the way opened by descriptor, never through
    a link (a command of the agent may rename them meanwhile; see :mod:`._tree`)."""
    try:
        fd = os.open(root, _DIR_FLAGS)
    except OSError:
        return False
    try:
        for name in names[:-1]:
            child = open_dir_at(fd, name)
            os.close(fd)
            fd = child
        return remove_at(fd, names[-1], expect)
    except OSError:
        return False
    finally:
        os.close(fd)


class QuotaWatch:
    """The quotas of one command's folders: watched while it runs, settled after."""

    def __init__(self, quotas: tuple[FolderQuota, ...]) -> None:
        self.quotas = quotas
        self.started_ns = time.time_ns()

    async def exceeded(self, first: float = 0.25, every: float = 0.5) -> str:
        """Return (the reason) once a folder is over its quota; never otherwise.
        Most commands end before the first measurement, which then costs nothing."""
        if not self.quotas:
            await asyncio.Future()  # nothing to watch: wait to be cancelled
        wait = first
        while True:
            await asyncio.sleep(wait)
            began = time.monotonic()
            reason = await asyncio.to_thread(self._check)
            if reason is not None:
                return reason
            # A large tree is measured less often than a small one.
            wait = max(every, 4 * (time.monotonic() - began))

    def _check(self) -> str | None:
        for quota in self.quotas:
            reason = quota.over(*measure(quota))
            if reason is not None:
                return f"{quota.label} {reason}"
        return None

    async def settled(self) -> str | None:
        """:meth:`settle`, in a thread unless every folder is small and under its
        quota (most are: measuring a few entries costs less than the thread hop)."""
        if all(_small_and_under(q) for q in self.quotas if q.trim):
            return None
        return await asyncio.to_thread(self.settle)

    def settle(self) -> str | None:
        """After the command: trim each folder back under its quota; says what went."""
        notes = []
        for quota in self.quotas:
            if not quota.trim:
                continue
            removed, freed = trim(quota, self.started_ns)
            if removed:
                notes.append(
                    f"{quota.label}: {removed} of the files and folders it wrote "
                    f"({_mib(freed)}) were removed to bring it back under its quota"
                )
        return "; ".join(notes) or None


def quotas_of(spec: SandboxSpec, launch: Launch) -> tuple[FolderQuota, ...]:
    """The quotas of one command: each read-write bind (its scratch) and each
    overlay's upper folder (what it writes to memory, discarded whole when over the
    capture limits, so not trimmed) at the writable limits, and each folder the launch
    fills outside a sized tmpfs (Landlock's ``TMPDIR``) at the ``TMPDIR`` size."""
    limits = spec.limits
    quotas = []
    for mount in spec.mounts:
        if mount.mode is not Mode.RW:
            continue
        folder = mount.source if mount.staging is None else mount.staging / "upper"
        quotas.append(
            FolderQuota(
                folder,
                str(mount.target),
                limits.writable_bytes,
                limits.writable_entries,
                trim=mount.staging is None,
            )
        )
    quotas += [
        FolderQuota(folder, "$TMPDIR", limits.tmp_size, limits.writable_entries, trim=False)
        for folder in launch.watched
    ]
    return tuple(quotas)
