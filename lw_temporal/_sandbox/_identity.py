"""Who a sandboxed command is on the host: never the worker's uid 0.

A root worker runs every command as a dedicated unprivileged user and group
(:data:`DEFAULT_UID`/:data:`DEFAULT_GID` unless configured; no account needs to exist);
a non-root worker runs them as itself, which is already unprivileged. Files a command
leaves are owned by that user, so a setuid bit (which the seccomp filter refuses
anyway) could never give anyone host root.

The data dir is ``root:<sandbox group>`` mode ``0750`` for a root worker (``0700`` for a
non-root one): other host users cannot enter it, so scratch and memory stay unreadable
to them, while the sandbox user (through its group) can reach the folders bubblewrap
binds and Landlock allows. The folders a command writes (its scratch, its ``TMPDIR``,
an overlay's upper folder) belong to the sandbox user; it cannot write anything else.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

#: The default host uid/gid of sandboxed commands under a root worker (an unassigned
#: range on Debian: neither a system account nor a regular user).
DEFAULT_UID = 64000
DEFAULT_GID = 64000

#: (setgroups, setresuid, setresgid) per machine: the raw calls change one thread only.
_CALLS = {"x86_64": (116, 117, 119), "aarch64": (159, 147, 149)}
_SYS_SETGROUPS, _SYS_SETRESUID, _SYS_SETRESGID = _CALLS.get(os.uname().machine, (-1, -1, -1))


@dataclass(frozen=True, slots=True)
class SandboxUser:
    """The host identity of sandboxed commands."""

    uid: int
    gid: int

    @classmethod
    def for_worker(cls, uid: int | None = None, gid: int | None = None) -> SandboxUser | None:
        """The identity for this worker: ``None`` (its own) unless it runs as root."""
        if os.geteuid() != 0:
            return None
        user = cls(DEFAULT_UID if uid is None else uid, DEFAULT_GID if gid is None else gid)
        if user.uid == 0 or user.gid == 0:
            raise ValueError("the sandbox user must not be root (uid and gid must be non-zero)")
        return user

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


def secure_data_dir(root: Path, user: SandboxUser | None) -> str | None:
    """Close ``root`` to other host users (see the module docstring). Returns why the
    sandbox user could not even reach it (a folder above it it may not search), if so."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        st = root.stat()
        if user is None:
            if st.st_mode & 0o077:
                os.chmod(root, st.st_mode & 0o700 | 0o700)
            return None
        if st.st_gid != user.gid:
            os.chown(root, -1, user.gid)
        if st.st_mode & 0o7777 != 0o750:
            os.chmod(root, 0o750)
        for parent in root.resolve().parents:
            pst = parent.stat()
            if not (
                pst.st_mode & 0o001
                or (pst.st_gid == user.gid and pst.st_mode & 0o010)
                or (pst.st_uid == user.uid and pst.st_mode & 0o100)
            ):
                return (
                    f"the sandbox user (uid {user.uid}) cannot reach the data dir {root}: "
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
    wrappers) has ``user``'s real and effective ids and no supplementary groups,
    keeping root as its saved uid to come back. A child it starts (``vfork`` + exec)
    is ``user`` entirely, with no capabilities."""
    if user is None:
        yield
        return
    if _SYS_SETGROUPS < 0:
        raise OSError(0, f"no thread-local identity switch known for {os.uname().machine}")
    call = _syscall()
    groups = os.getgroups()
    gids = (ctypes.c_uint * 1)(user.gid)
    if call(_SYS_SETGROUPS, 1, gids) != 0 or call(_SYS_SETRESGID, user.gid, user.gid, 0) != 0:
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
