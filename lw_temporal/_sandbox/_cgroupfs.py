"""The cgroup file systems under a command's cgroup: where this worker may create
folders (its own cgroups, the mounts, which controllers a v2 folder delegates), one
folder held open by descriptor, killing and reaping what is left in it, each thread's
home cgroup, and the pid namespace that names a worker's folders."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

_CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True, slots=True)
class _Hierarchy:
    """One place where this worker may create command cgroups."""

    #: The worker's own folder in it (``lw-<pid>-<random>``), created on first use.
    base: Path
    version: int
    controllers: frozenset[str]


_READ = os.O_RDONLY | os.O_CLOEXEC
_WRITE = os.O_WRONLY | os.O_CLOEXEC


@dataclass(slots=True)
class _Folder:
    """One folder of a command cgroup, with the files every command writes or reads
    held open: through a held descriptor that costs a microsecond, opening the file by
    path each time twenty. (``cgroup.procs`` is opened anew for each read: on v1 an
    open file keeps the list it first read for a second.)"""

    hierarchy: _Hierarchy
    path: Path
    #: v1 ``tasks``, which the spawning thread joins (-1 on v2).
    tasks: int = -1
    #: ``memory.oom_control`` (v1) or ``memory.events`` (v2); -1 without memory.
    events: int = -1
    procs_path: str = ""
    #: The folder's inode when it was made: one removed and made again under the same
    #: name is another cgroup, which the descriptors held here do not reach.
    ino: int = 0

    @classmethod
    def open(cls, hierarchy: _Hierarchy, path: Path) -> _Folder:
        folder = cls(hierarchy, path, procs_path=str(path / "cgroup.procs"))
        try:
            folder.ino = os.stat(path).st_ino
            if hierarchy.version == 1:
                folder.tasks = os.open(path / "tasks", _WRITE)
            if "memory" in hierarchy.controllers:
                name = "memory.events" if hierarchy.version == 2 else "memory.oom_control"
                folder.events = os.open(path / name, _READ)
        except OSError:
            folder.close()
            raise
        return folder

    def procs(self, size: int = 1 << 16) -> bytes:
        """The start of ``cgroup.procs`` (what a kill pass needs: it is repeated)."""
        fd = os.open(self.procs_path, _READ)
        try:
            return os.read(fd, size)
        finally:
            os.close(fd)

    def empty(self) -> bool:
        return not self.procs(16).strip()

    def intact(self) -> bool:
        """Whether this is still the folder that was made (not removed, or replaced)."""
        try:
            return os.stat(self.path).st_ino == self.ino
        except OSError:
            return False

    def close(self) -> None:
        for fd in (self.tasks, self.events):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.tasks = self.events = -1


class CgroupGone(OSError):
    """A command's cgroup folder was removed between its check and its use (the
    launch is tried once more in a folder made anew)."""


def _kill_all(folder: _Folder) -> bool:
    """SIGKILL every process in ``folder`` (one pass); whether it was empty already."""
    if folder.hierarchy.version == 2:
        with contextlib.suppress(OSError):
            (folder.path / "cgroup.kill").write_text("1")
            return False
    try:
        pids = [int(p) for p in folder.procs().split()]
    except (OSError, ValueError):
        return True
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return not pids


def _reap(folder: _Folder) -> None:
    """Kill what is in ``folder`` and wait (briefly) until the kernel has reaped it."""
    for _ in range(20):
        if _kill_all(folder) and folder.hierarchy.version == 1:
            return
        if folder.hierarchy.version == 2:
            with contextlib.suppress(OSError):
                if folder.empty():
                    return
        time.sleep(0.005)


#: The calling thread's own ``tasks`` file per hierarchy, found and opened once per
#: thread: a thread lives where it was put and only :meth:`CommandCgroup.born_inside`
#: moves it, always back home, while reading ``/proc`` for it costs ~0.2 ms per
#: hierarchy per command. A thread-local (made on first use, not at import: workflow
#: sandboxes import this module), so the memo, and its descriptors, die with its
#: thread, whose id may be reused.
_homes: threading.local | None = None


class _HomeTasks(dict[Path, int]):
    """One thread's home ``tasks`` descriptors by hierarchy base (closed with it)."""

    def __del__(self) -> None:
        for fd in self.values():
            with contextlib.suppress(OSError):
                os.close(fd)


def _home_tasks(hierarchy: _Hierarchy) -> int:
    global _homes
    if _homes is None:
        _homes = threading.local()
    homes: _HomeTasks | None = getattr(_homes, "tasks", None)
    if homes is None:
        homes = _homes.tasks = _HomeTasks()
    fd = homes.get(hierarchy.base)
    if fd is None:
        fd = homes[hierarchy.base] = os.open(_thread_home(hierarchy) / "tasks", _WRITE)
    return fd


def _thread_home(hierarchy: _Hierarchy) -> Path:
    """The calling thread's folder in a v1 hierarchy (at or below the worker's own,
    which is the parent of ``hierarchy.base``)."""
    own = _own_cgroups()
    for line in Path("/proc/thread-self/cgroup").read_text().splitlines():
        _, controllers, rel = line.split(":", 2)
        if hierarchy.controllers & set(controllers.split(",")):
            mine = next(own[c] for c in controllers.split(",") if c in own)
            if rel == mine:
                return hierarchy.base.parent
            if rel.startswith(mine.rstrip("/") + "/"):
                return hierarchy.base.parent / rel[len(mine.rstrip("/")) + 1 :]
            break
    raise OSError(f"the spawning thread's cgroup in {hierarchy.base.parent} is unknown")


def _own_cgroups() -> dict[str, str]:
    """The worker's cgroup path per v1 controller (and ``""`` for v2)."""
    found: dict[str, str] = {}
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, rel = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                found[controller] = rel
    return found


def _mounts() -> list[tuple[str, Path, str]]:
    """(fs type, mount point, options) of each cgroup mount, from mountinfo."""
    found: list[tuple[str, Path, str]] = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                root, point = fields[3], fields[4]
                found.append((tail[0], Path(point), tail[2] + "," + root))
    return found


def _writable(folder: Path) -> bool:
    return (
        folder.is_dir()
        and os.access(folder, os.W_OK)
        and os.access(folder / "cgroup.procs", os.W_OK)
    )


def _inside(point: Path, mount_root: str, rel: str) -> Path:
    if mount_root != "/" and (rel == mount_root or rel.startswith(mount_root + "/")):
        rel = rel[len(mount_root) :]
    return point / rel.lstrip("/")


def _v2_controllers(folder: Path) -> frozenset[str]:
    """The controllers children of ``folder`` get (``subtree_control``), enabling
    memory, pids and cpu there when the folder is delegated and may enable them."""
    control = folder / "cgroup.subtree_control"
    try:
        enabled = set(control.read_text().split())
        available = set((folder / "cgroup.controllers").read_text().split())
    except OSError:
        return frozenset()
    for controller in ("memory", "pids", "cpu"):
        if controller in available and controller not in enabled:
            with contextlib.suppress(OSError):
                control.write_text(f"+{controller}")
                enabled.add(controller)
    return frozenset(enabled & {"memory", "pids", "cpu"})


@functools.cache
def _pid_namespace() -> int:
    """This process's pid namespace (its inode): a pid means something only in it."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


#: The initial pid namespace's inode (``PROC_PID_INIT_INO``): the host's.
_INIT_PID_NAMESPACE = 0xEFFFFFFC


def namespace_tag() -> str:
    """What a worker's cgroup folder names carry of its pid namespace."""
    return f"n{_pid_namespace()}"


def _gone_worker(name: str) -> bool:
    """Whether the folder ``name`` belongs to a worker of this pid namespace that is
    no longer running. Names: ``lw-<pid>-<tag>n<ns>[-m<total>]`` (command cgroups and
    their parents) and ``lw-sandboxes-<pid>-<limit>n<ns>`` (the spawner's). A folder of
    another namespace is never judged (its pid means nothing here), nor one without a
    namespace (an older version's) unless this is the host's namespace, where its
    pid is the host's."""
    parts = name.split("-")
    if len(parts) < 3:
        return False
    pid = parts[2] if parts[1] == "sandboxes" and len(parts) > 3 else parts[1]
    if not pid.isdigit():
        return False
    tagged = re.search(r"n(\d+)$", parts[3] if parts[1] == "sandboxes" else parts[2])
    mine = _pid_namespace()
    if tagged is not None and int(tagged.group(1)) != mine:
        return False
    if tagged is None and mine != _INIT_PID_NAMESPACE:
        return False
    return not Path(f"/proc/{pid}").exists()
