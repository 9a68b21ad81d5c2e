"""Aggregate limits of one command: a cgroup of its own, where the kernel gives one.

rlimits bind each process alone (four processes of 3 GiB each pass a 4 GiB
``RLIMIT_AS``); a cgroup binds all of a command's processes together. Each command
gets a fresh child cgroup with its memory (swap included, so nothing spills to swap)
and process count capped, under a folder of this worker: on cgroup v2 one folder with
``memory.max``, ``memory.swap.max`` and ``pids.max``; on cgroup v1 one folder in the
memory hierarchy (``memory.limit_in_bytes``, ``memory.memsw.limit_in_bytes``), one
in the pids hierarchy and one in the cpu hierarchy. The cpu controller (where it can
be had) makes each command one share of the CPU among the commands, and all of them
(their parent) one against the worker: without it the kernel's autogroup weighed each session as
one, and a command of 100 sessions (``setsid``) took 100 shares to another agent's
one. The launcher is moved in right after it starts and before it
reads its options (bwrap's ``--args`` pipe, the Landlock launcher's JSON), so it has
forked nothing yet: every process of the command is born inside. Pages of its tmpfs
(``/tmp``, ``/dev/shm``) are charged there too. When the command ends, whatever is
left in its cgroup is killed and the cgroup removed.

All command cgroups of a worker lie under one parent (:func:`parent`) whose memory
limit bounds all commands together, ``Limits.total_memory``: tmpfs pages (a command's
``/tmp``, Landlock's ``TMPDIR``, memory staged in an overlay) are charged to the
command that first wrote them and, once its cgroup is gone, to the parent, so staged
memory counts until the worker removes it. The worker itself is not under it.

Where no memory controller is writable (a container without a delegated cgroup),
:func:`command_cgroups` says so and only the per-process rlimits apply (the README's
guarantees table names both). The folders of a worker that died are swept by the
next worker of the same pid namespace that starts (empty ones only: a cgroup holding
a process cannot be removed; and a pid says nothing in another namespace).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import itertools
import logging
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ._cgroupfs import (
    CgroupGone,
    _Folder,
    _gone_worker,
    _Hierarchy,
    _home_tasks,
    _inside,
    _kill_all,
    _mounts,
    _own_cgroups,
    _reap,
    _v2_controllers,
    _writable,
    namespace_tag,
)
from ._exits import at_exit

logger = logging.getLogger(__name__)

_counter = itertools.count()


@dataclass(frozen=True, slots=True)
class CgroupSupport:
    """Which cgroup limits this worker can give each command (see the module doc)."""

    hierarchies: tuple[_Hierarchy, ...]

    @property
    def memory(self) -> bool:
        return any("memory" in h.controllers for h in self.hierarchies)

    @property
    def pids(self) -> bool:
        return any("pids" in h.controllers for h in self.hierarchies)

    @property
    def description(self) -> str:
        if not self.hierarchies:
            return "no cgroup (per-process rlimits only)"
        parts = [f"cgroup v{h.version} {'+'.join(sorted(h.controllers))}" for h in self.hierarchies]
        return ", ".join(parts)

    def create(self, memory: int, pids: int, total: int | None = None) -> CommandCgroup | None:
        """A cgroup for one command (an idle one of the same limits, or a new one),
        or ``None`` where none can be made; it lies under the worker-wide parent that
        bounds the memory of all commands together at ``total`` (see :func:`parent`)."""
        total = default_total_memory() if total is None else total
        idle = _IDLE.setdefault((memory, pids, total), [])
        for cgroup in reversed(idle):  # one still draining its last command stays idle
            if not cgroup.intact():  # removed behind this worker's back: made anew
                idle.remove(cgroup)
                cgroup.forget()
            elif cgroup.reusable():
                idle.remove(cgroup)
                return cgroup
        try:
            folders = _new_folders(self.hierarchies, memory, pids, total)
        except OSError as err:
            logger.warning("lw.bash: no cgroup for this command (%s); rlimits only", err)
            return None
        return CommandCgroup(folders, idle, total, (memory, pids))


def _new_folders(
    hierarchies: tuple[_Hierarchy, ...], memory: int, pids: int, total: int
) -> tuple[_Folder, ...]:
    """A new folder in each hierarchy, under the worker-wide parent (made again when
    it was removed behind this worker's back), its limits written."""
    folders: list[_Folder] = []
    name = f"cmd-{next(_counter)}"
    try:
        for hierarchy in hierarchies:
            path = parent(hierarchy, total) / name
            if not path.parent.is_dir():
                parent.cache_clear()
                path = parent(hierarchy, total) / name
            path.mkdir()
            try:
                folders.append(_Folder.open(hierarchy, path))
            except OSError:
                path.rmdir()
                raise
            for key, value in _limit_files(hierarchy, memory, pids):
                (path / key).write_text(value)
    except OSError:
        CommandCgroup(tuple(folders), [], total, (memory, pids)).remove()
        raise
    return tuple(folders)


#: Idle command cgroups per (memory, pids, total) limits: making and removing a memory
#: cgroup costs about a millisecond, reusing an empty one nothing.
_IDLE: dict[tuple[int, int, int], list[CommandCgroup]] = {}
_IDLE_MAX = 8
#: An idle cgroup still charged this much (tmpfs pages its last command wrote: staging
#: not yet removed) is not given to the next command, whose limit it would shrink.
_REUSE_CHARGE_MAX = 32 * 1024 * 1024


@functools.cache
def parent(hierarchy: _Hierarchy, total: int) -> Path:
    """The worker-wide parent of the command cgroups, made once: in a memory
    hierarchy its limit is ``total`` (swap included), so all commands together, their
    tmpfs pages (``/tmp``, Landlock's ``TMPDIR``, overlay staging: charged to the
    command that wrote them, and to this parent once that command's cgroup is gone)
    included, never take more; the kernel's OOM killer then picks among the commands
    under it, never the worker, which stays outside. On cgroup v2 it also hands the
    controllers down to the command cgroups."""
    folder = hierarchy.base.with_name(f"{hierarchy.base.name}-m{total >> 20}")
    folder.mkdir(exist_ok=True)
    if hierarchy.version == 2:
        (folder / "cgroup.subtree_control").write_text(
            " ".join(f"+{c}" for c in sorted(hierarchy.controllers - {"cpu"}))
        )
        if "cpu" in hierarchy.controllers:  # refused while a real-time task is below
            with contextlib.suppress(OSError):
                (folder / "cgroup.subtree_control").write_text("+cpu")
        if "memory" in hierarchy.controllers:
            (folder / "memory.max").write_text(str(total))
            (folder / "memory.swap.max").write_text("0")
    elif "memory" in hierarchy.controllers:
        (folder / "memory.limit_in_bytes").write_text(str(total))
        with contextlib.suppress(OSError):  # no swap accounting: no swap to bound
            (folder / "memory.memsw.limit_in_bytes").write_text(str(total))
    _PARENTS.append(folder)
    return folder


_PARENTS: list[Path] = []


@functools.cache
def default_total_memory() -> int:
    """Half of what the worker may use: the host's memory, or its own cgroup's limit
    when lower (a container's)."""
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        pages = 8 << 30
    own = _own_cgroups()
    for fstype, point, options in _mounts():
        controllers = options.split(",")
        if fstype == "cgroup2" and "" in own:
            limit_file = _inside(point, options.rsplit(",", 1)[1], own[""]) / "memory.max"
        elif fstype == "cgroup" and "memory" in controllers and "memory" in own:
            rel = own["memory"]
            limit_file = _inside(point, options.rsplit(",", 1)[1], rel) / "memory.limit_in_bytes"
        else:
            continue
        with contextlib.suppress(OSError, ValueError):
            pages = min(pages, int(limit_file.read_text().strip()))
    return max(pages // 2, 64 << 20)


def _limit_files(hierarchy: _Hierarchy, memory: int, pids: int) -> list[tuple[str, str]]:
    files: list[tuple[str, str]] = []
    if hierarchy.version == 2:
        if "memory" in hierarchy.controllers:
            files += [("memory.max", str(memory)), ("memory.swap.max", "0")]
        if "pids" in hierarchy.controllers:
            files.append(("pids.max", str(pids)))
    elif "memory" in hierarchy.controllers:
        # memsw (memory + swap) can only be set at or above the memory limit.
        files.append(("memory.limit_in_bytes", str(memory)))
        files.append(("memory.memsw.limit_in_bytes", str(memory)))
    elif "pids" in hierarchy.controllers:
        files.append(("pids.max", str(pids)))
    return files  # cpu: the default weight, one share per command


class CommandCgroup:
    """The cgroup (one folder per hierarchy) of one running command."""

    def __init__(
        self,
        folders: tuple[_Folder, ...],
        idle: list[CommandCgroup],
        total: int,
        limits: tuple[int, int],
    ) -> None:
        self.folders = folders
        self.idle = idle
        #: The bound of all commands together (their parent's).
        self.total = total
        #: Its own memory and process bounds (what a folder made anew is given).
        self.limits = limits
        self.oom_base = 0

    def intact(self) -> bool:
        """Whether every folder is still there (an empty cgroup can be removed by
        anyone with the right: an old worker's sweep, an administrator)."""
        return all(f.intact() for f in self.folders)

    def forget(self) -> None:
        """Let go of folders that are gone (their descriptors closed)."""
        for folder in self.folders:
            folder.close()

    def renew(self) -> None:
        """Replace folders removed since this cgroup was made or last checked with new
        ones of the same limits (raises OSError where none can be made)."""
        if self.intact():
            return
        self.forget()
        self.folders = _new_folders(
            tuple(f.hierarchy for f in self.folders), *self.limits, self.total
        )
        self.oom_base = 0

    @property
    def pids(self) -> bool:
        """Whether the command's process count is capped here."""
        return any("pids" in f.hierarchy.controllers for f in self.folders)

    @property
    def moves_launcher(self) -> bool:
        """Whether :meth:`attach` has to move the launcher (cgroup v2: a process is
        moved whole, by root), rather than it being born inside (v1)."""
        return any(f.hierarchy.version == 2 for f in self.folders)

    def attach(self, pid: int) -> None:
        """Move ``pid`` (the launcher, before it forks) into every cgroup v2 folder
        (on v1 it was born inside, see :meth:`born_inside`)."""
        for folder in self.folders:
            if folder.hierarchy.version == 2:
                (folder.path / "cgroup.procs").write_text(str(pid))

    def prepare(self) -> None:
        """As root, right before the launch: make anew any folder removed since the
        cgroup was checked, and open the calling thread's own ``tasks`` files (once per
        thread), so that :meth:`born_inside` can go home under the launcher's ids: v1
        lets a thread move itself through a descriptor opened before."""
        self.renew()
        for folder in self.folders:
            if folder.hierarchy.version == 1:
                _home_tasks(folder.hierarchy)

    @contextlib.contextmanager
    def born_inside(self) -> Iterator[None]:
        """Around the launcher's fork: on cgroup v1 the calling thread joins the
        command's folders and goes home after, so the launcher is born inside.

        v1 places threads one by one, and moving the caller itself (``0`` into
        ``tasks``) takes no global lock, while moving another process there takes
        the kernel's threadgroup lock for writing, which waits for an RCU grace
        period (~10 ms per command on a busy host)."""
        v1 = [f for f in self.folders if f.hierarchy.version == 1]
        homes = [_home_tasks(f.hierarchy) for f in v1]
        moved: list[int] = []
        try:
            for folder, home in zip(v1, homes, strict=True):
                try:
                    os.write(folder.tasks, b"0")
                except OSError as err:
                    if err.errno != errno.ENODEV:
                        raise
                    raise CgroupGone(f"the command's cgroup {folder.path} was removed") from None
                moved.append(home)
            yield
        finally:
            for home in moved:  # a spawner left in a command's cgroup would stay there
                os.write(home, b"0")

    def _oom_kills(self) -> int:
        for folder in self.folders:
            if folder.events < 0:
                continue
            with contextlib.suppress(OSError, ValueError):
                for line in os.pread(folder.events, 1 << 10, 0).splitlines():
                    key, _, value = line.partition(b" ")
                    if key == b"oom_kill":
                        return int(value)
        return 0

    def memory_exceeded(self) -> bool:
        """Whether the kernel killed a process of this command at its memory limit."""
        return self._oom_kills() > self.oom_base

    def _empty(self) -> bool:
        """Whether no process is left in it: every process of the command is in all
        its folders (born there, and none may move itself), so one listing answers.
        (``pids.current`` would be cheaper, but counts an exited process until its
        parent reaps it, which for bwrap's pid 1 is whoever adopts it.)"""
        return not self.folders or self.folders[0].empty()

    def reusable(self) -> bool:
        """Empty, still there and hardly charged: ready for the next command
        (counting anew)."""
        try:
            if not self._empty() or self._charged() > _REUSE_CHARGE_MAX:
                return False
        except OSError:
            return False
        self.oom_base = self._oom_kills()
        return True

    async def drained(self, checks: int) -> None:
        """Wait until this cgroup is hardly charged any more, looking ``checks`` times
        at most, 10 ms apart (the kernel says when it is over a charge, not under)."""
        with contextlib.suppress(OSError, ValueError):
            for _ in range(checks):
                if self._charged() <= _REUSE_CHARGE_MAX:
                    return
                await asyncio.sleep(0.01)

    def _charged(self) -> int:
        for folder in self.folders:
            if "memory" in folder.hierarchy.controllers:
                v2 = folder.hierarchy.version == 2
                name = "memory.current" if v2 else "memory.usage_in_bytes"
                return int((folder.path / name).read_text())
        return 0

    def close(self) -> None:
        """Kill whatever the command left in its cgroup and keep the cgroup for reuse.

        The kill is one pass that does not wait: the processes of a command whose
        launcher has exited are already dying with its pid namespace, and the next
        :meth:`CgroupSupport.create` takes this cgroup only once it is empty, so no
        command waits here for the kernel to reap the last one's processes."""
        if self in self.idle:
            return
        try:
            empty = self._empty()
        except OSError:
            empty = False
        if not empty:
            for folder in self.folders:
                _kill_all(folder)
        if len(self.idle) < _IDLE_MAX:
            self.idle.append(self)
        else:
            self.remove()

    def remove(self) -> None:
        for folder in self.folders:
            _reap(folder)
            folder.close()
            for _ in range(200):
                try:
                    folder.path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # its last processes are still exiting
                    time.sleep(0.005)
            else:
                logger.warning("lw.bash: cgroup %s not removed (still busy)", folder.path)


@functools.cache
def command_cgroups() -> CgroupSupport:
    """What this worker can give each command (probed once per process)."""
    own = _own_cgroups()
    tag = f"lw-{os.getpid()}-{uuid.uuid4().hex[:6]}{namespace_tag()}"
    hierarchies: list[_Hierarchy] = []
    mounts = _mounts()
    for fstype, point, options in mounts:
        mount_root = options.rsplit(",", 1)[1]
        if fstype == "cgroup2" and "" in own:
            folder = _inside(point, mount_root, own[""])
            wanted = _v2_controllers(folder)
            if wanted and _writable(folder):
                hierarchies.append(_Hierarchy(folder / tag, 2, wanted))
                _sweep(folder)
    if not any(h.version == 2 for h in hierarchies):
        for controller in ("memory", "pids", "cpu"):
            for fstype, point, options in mounts:
                if fstype != "cgroup" or controller not in options.split(","):
                    continue
                rel = own.get(controller)
                if rel is None:
                    continue
                folder = _inside(point, options.rsplit(",", 1)[1], rel)
                if _writable(folder):
                    hierarchies.append(_Hierarchy(folder / tag, 1, frozenset({controller})))
                    _sweep(folder)
                break
    support = CgroupSupport(tuple(hierarchies))
    at_exit(_remove_bases, support)
    return support


def _remove_bases(support: CgroupSupport) -> None:
    for idle in _IDLE.values():
        while idle:
            idle.pop().remove()
    for folder in _PARENTS:
        with contextlib.suppress(OSError):
            folder.rmdir()
    for hierarchy in support.hierarchies:
        with contextlib.suppress(OSError):
            hierarchy.base.rmdir()


def _sweep(folder: Path) -> None:
    """Remove the empty command cgroups of workers that are gone (and the pids
    folders earlier versions left). A cgroup with a process in it cannot be removed,
    so a live worker's running commands are never touched."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    removed = 0
    for entry in entries[:10_000]:
        if not entry.name.startswith("lw-") or not entry.is_dir(follow_symlinks=False):
            continue
        if not _gone_worker(entry.name):
            continue
        base = Path(entry.path)
        with contextlib.suppress(OSError):
            for child in base.iterdir():
                if child.is_dir():
                    with contextlib.suppress(OSError):
                        child.rmdir()
            base.rmdir()
            removed += 1
    if removed:
        logger.info("lw.bash: removed %d cgroup folders of workers that are gone", removed)
