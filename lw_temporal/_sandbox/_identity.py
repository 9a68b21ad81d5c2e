"""Who a sandboxed command is on the host: never the worker's uid 0.

A root worker runs each agent's commands as a uid and gid of that agent's own, leased
from a range (:mod:`._leases`), with supplementary groups: the range's shared group,
which lets them reach the data dir, and the group of each folder the agent reads but
does not own (its planner's and orchestrator's scratch, the stores it mounts). No
account needs to exist. A non-root worker cannot switch uids: its commands run as
itself, one uid for every agent (see the README). Files a command leaves are owned by
its agent's uid, so a setuid bit (which the seccomp filter refuses anyway) could never
give anyone host root.

The data dir is ``root:<shared group>`` mode ``0750`` for a root worker (``0700`` for
a non-root one): other host users cannot enter it, while the agents can reach the
folders bubblewrap binds and Landlock allows. Inside it, each agent's scratch is its
own (``0750``, readable through its group by the agents below it), each store root is
``root:<store group>`` ``0750``, and the folders between them are ``0711`` (passable,
not listable), so an agent can neither list, watch, stat nor change what another
agent or store holds.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ._idrange import check_ids, default_ids

#: (setgroups, setresuid, setresgid) per machine: the raw calls change one thread only.
_CALLS = {"x86_64": (116, 117, 119), "aarch64": (159, 147, 149)}
_SYS_SETGROUPS, _SYS_SETRESUID, _SYS_SETRESGID = _CALLS.get(os.uname().machine, (-1, -1, -1))


@dataclass(frozen=True, slots=True)
class SandboxUser:
    """The host identity of one command: its agent's uid and gid, and the other
    groups it holds (see the module)."""

    uid: int
    gid: int
    groups: tuple[int, ...] = ()

    @classmethod
    def for_worker(cls, ids: range | None = None) -> SandboxUser | None:
        """The identity of a command that belongs to no agent (the self-test): the
        range's shared id, which is no agent's uid, under a root worker; ``None`` (the
        worker's own) otherwise."""
        if os.geteuid() != 0:
            return None
        shared = check_ids(ids or default_ids())[0]
        return cls(shared, shared)

    @property
    def all_groups(self) -> tuple[int, ...]:
        """The primary group, then the supplementary ones (each once)."""
        return tuple(dict.fromkeys((self.gid, *self.groups)))

    def own(self, path: Path, mode: int = 0o700) -> None:
        """Make ``path`` (a folder the command writes) the sandbox user's."""
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
            if (st.st_uid, st.st_gid) != (self.uid, self.gid):
                os.fchown(fd, self.uid, self.gid)
            if st.st_mode & 0o7777 != mode:
                os.fchmod(fd, mode)
        finally:
            os.close(fd)


def secure_data_dir(root: Path, shared_gid: int | None, inner: tuple[Path, ...] = ()) -> str | None:
    """Close ``root`` to other host users (see the module docstring) and make the
    ``inner`` folders (the runs, memory and bookkeeping roots) passable but not
    listable. Returns why the agents could not even reach it (a folder above it they
    may not search), if so."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        st = root.stat()
        if shared_gid is None:
            if st.st_mode & 0o077:
                os.chmod(root, st.st_mode & 0o700 | 0o700)
            return None
        if st.st_gid != shared_gid:
            os.chown(root, -1, shared_gid)
        if st.st_mode & 0o7777 != 0o750:
            os.chmod(root, 0o750)
        for folder in inner:
            folder.mkdir(parents=True, exist_ok=True)
            if folder.stat().st_mode & 0o7777 != 0o711:
                os.chmod(folder, 0o711)
        for parent in root.resolve().parents:
            pst = parent.stat()
            if not (pst.st_mode & 0o001 or (pst.st_gid == shared_gid and pst.st_mode & 0o010)):
                return (
                    f"the sandbox ids (group {shared_gid}) cannot reach the data dir {root}: "
                    f"{parent} is mode {pst.st_mode & 0o7777:o}; let others search it "
                    f"(chmod o+x {parent}) or choose a data dir whose parents they can"
                )
    except OSError as err:
        return f"cannot secure the data dir {root}: {err}"
    return None


@functools.cache
def _syscall() -> ctypes._FuncPointer:
    libc = ctypes.CDLL(None, use_errno=True)
    fn = libc.syscall
    fn.restype = ctypes.c_long
    return fn


@contextlib.contextmanager
def thread_as(user: SandboxUser | None) -> Iterator[None]:
    """Inside: the calling thread (only it: raw system calls, not libc's process-wide
    wrappers) has ``user``'s real and effective ids and its groups,
    keeping root as its saved uid to come back. A child it starts (``vfork`` + exec)
    is ``user`` entirely, with no capabilities."""
    if user is None:
        yield
        return
    if _SYS_SETGROUPS < 0:
        raise OSError(0, f"no thread-local identity switch known for {os.uname().machine}")
    call = _syscall()
    groups = os.getgroups()
    wanted = user.all_groups
    gids = (ctypes.c_uint * len(wanted))(*wanted)
    if (
        call(_SYS_SETGROUPS, len(wanted), gids) != 0
        or call(_SYS_SETRESGID, user.gid, user.gid, 0) != 0
    ):
        raise OSError(ctypes.get_errno(), "cannot switch to the sandbox group")
    if call(_SYS_SETRESUID, user.uid, user.uid, 0) != 0:
        code = ctypes.get_errno()
        call(_SYS_SETRESGID, 0, 0, 0)
        raise OSError(code, "cannot switch to the sandbox user")
    try:
        yield
    finally:
        restored = call(_SYS_SETRESUID, 0, 0, 0) == 0 and call(_SYS_SETRESGID, 0, 0, 0) == 0
        back = (ctypes.c_uint * max(len(groups), 1))(*groups)
        restored = restored and call(_SYS_SETGROUPS, len(groups), back) == 0
        if not restored:  # pragma: no cover - the kernel keeps a saved uid 0 restorable
            os._exit(70)


def give_streams(fds: tuple[int, ...], user: SandboxUser | None) -> None:
    """Make the command's output pipes ``user``'s, as a launch that creates them as
    that user does (bwrap's): a command reopening its own stream (``> /dev/stderr``,
    ``tee /dev/stdout``, ``open("/proc/self/fd/1")``) is checked by the kernel like a
    file, and a pipe the worker made as root (mode 0600) refused it. Best effort: a
    pipe that stays the worker's only keeps those reopenings refused."""
    if user is None:
        return
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.fstat(fd).st_uid != user.uid:
                os.fchown(fd, user.uid, user.gid)
