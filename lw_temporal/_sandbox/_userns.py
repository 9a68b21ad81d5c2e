"""Overlay mounts for bwrap, made without any helper program.

bwrap 0.8 cannot mount an overlay, so the overlays are mounted in a mount namespace
that bwrap then starts from, and bwrap binds the merged folders. Two ways, by what
the worker may do:

* A worker with ``CAP_SYS_ADMIN`` (root on a host): the thread that spawns the
  sandboxes keeps a mount namespace of its own (a slave of the host's, so host mounts
  still reach it and nothing flows back). Per command it takes a fresh copy of it,
  mounts the overlays there, starts bwrap (which starts from that copy) and returns to
  its own: system calls in the parent, and the child is a plain ``vfork`` and exec.
* Any other worker: the forked child enters a user and mount namespace of its own
  (root mapped to the worker's user), makes its mounts private and mounts the
  overlays before it execs bwrap. The child must be a full ``fork`` of the worker
  (``preexec_fn``), which costs more.

Either way bwrap creates its own nested user namespace as usual. Everything the child
needs (the libc functions, every path and option string, the messages) is prepared
before the fork: the child runs between fork and exec of a threaded process, where it
should do nothing but system calls. A step that fails writes ``LAUNCH_FAILED_MARKER``
and the reason to the command's stderr and exits with ``LAUNCH_FAILED_STATUS`` (in the
spawner thread: raises :class:`LaunchFailed` with that text), which the caller reports
as a sandbox failure.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
from collections.abc import Callable, Iterator
from typing import Any

#: Exit status and stderr marker of a failed sandbox launch (not the command's own).
LAUNCH_FAILED_STATUS = 125
LAUNCH_FAILED_MARKER = "lw-sandbox: launch failed"

#: One overlay: (target the command sees, merged folder, overlay mount options).
Overlay = tuple[str, str, str]

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_REC = 0x4000
_MS_PRIVATE = 1 << 18
_MS_SLAVE = 1 << 19

_Syscall = Callable[..., int]


class LaunchFailed(RuntimeError):
    """The sandbox could not be set up; the message starts with the marker."""


@functools.cache
def _libc() -> tuple[_Syscall, _Syscall, _Syscall]:
    libc = ctypes.CDLL(None, use_errno=True)
    unshare: Any = libc.unshare
    unshare.argtypes = [ctypes.c_int]
    unshare.restype = ctypes.c_int
    mount: Any = libc.mount
    mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    mount.restype = ctypes.c_int
    setns: Any = libc.setns
    setns.argtypes = [ctypes.c_int, ctypes.c_int]
    setns.restype = ctypes.c_int
    return unshare, mount, setns


@functools.cache
def _reasons() -> dict[int, bytes]:
    return {code: os.strerror(code).encode() + b"\n" for code in range(1, 134)}


def _encoded(overlays: tuple[Overlay, ...]) -> tuple[tuple[bytes, bytes, bytes], ...]:
    """(merged, options, message prefix) as bytes; the message names the target the
    command sees, never a host path."""
    return tuple(
        (
            os.fsencode(merged),
            options.encode("utf-8", "surrogateescape"),
            f"{LAUNCH_FAILED_MARKER}: overlay mount for {target}: ".encode(
                "utf-8", "backslashreplace"
            ),
        )
        for target, merged, options in overlays
    )


class OverlayNamespace:
    """A ``preexec_fn``: enter a user and mount namespace, mount the overlays."""

    def __init__(self, overlays: tuple[Overlay, ...]) -> None:
        self._unshare, self._mount, _ = _libc()
        self._files = (
            (b"/proc/self/setgroups", b"deny"),
            (b"/proc/self/uid_map", b"0 %d 1" % os.geteuid()),
            (b"/proc/self/gid_map", b"0 %d 1" % os.getegid()),
        )
        self._overlays = _encoded(overlays)
        prefix = LAUNCH_FAILED_MARKER.encode()
        self._unshare_failed = prefix + b": user and mount namespace: "
        self._map_failed = prefix + b": user namespace id map: "
        self._private_failed = prefix + b": private mounts: "
        self._unexpected = prefix + b": namespace setup: unexpected error\n"
        self._reasons = _reasons()
        self._unknown = b"unknown error\n"

    def __call__(self) -> None:
        try:
            self._setup()
        except BaseException:
            self._fail(self._unexpected, 0)

    def _setup(self) -> None:
        if self._unshare(_CLONE_NEWUSER | _CLONE_NEWNS) != 0:
            self._fail(self._unshare_failed, ctypes.get_errno())
        for path, data in self._files:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
                try:
                    os.write(fd, data)
                finally:
                    os.close(fd)
            except OSError as err:
                self._fail(self._map_failed, err.errno or 0)
        if self._mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
            self._fail(self._private_failed, ctypes.get_errno())
        for merged, options, failed in self._overlays:
            if self._mount(b"lw-overlay", merged, b"overlay", 0, options) != 0:
                self._fail(failed, ctypes.get_errno())

    def _fail(self, message: bytes, code: int) -> None:
        reason = self._reasons.get(code, self._unknown) if code else b""
        try:
            os.write(2, message + reason)
        finally:
            os._exit(LAUNCH_FAILED_STATUS)


class ThreadMounts:
    """The spawner thread's own mount namespace, for a worker with ``CAP_SYS_ADMIN``.

    Create it on the thread that spawns (it changes that thread only: its mount
    namespace, root and working folder), and use it on that thread only."""

    def __init__(self, base_fd: int) -> None:
        self._unshare, self._mount, self._setns = _libc()
        self._base_fd = base_fd

    @classmethod
    def enter(cls) -> ThreadMounts | None:
        """Move the calling thread into a namespace of its own; ``None`` when the
        worker may not (then each child makes its own, see :class:`OverlayNamespace`)."""
        unshare, mount, setns = _libc()
        host_fd = os.open("/proc/thread-self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        try:
            if unshare(_CLONE_NEWNS) != 0:
                return None
            if mount(None, b"/", None, _MS_REC | _MS_SLAVE, None) != 0:
                if setns(host_fd, _CLONE_NEWNS) != 0:
                    raise OSError(ctypes.get_errno(), "cannot return to the host mounts")
                return None
            return cls(os.open("/proc/thread-self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC))
        finally:
            os.close(host_fd)

    @contextlib.contextmanager
    def mounted(self, overlays: tuple[Overlay, ...]) -> Iterator[None]:
        """Inside: the calling thread is in a fresh copy of its namespace with the
        overlays mounted; a child started there keeps that copy, nobody else sees it.
        Raises :class:`LaunchFailed` when an overlay cannot be mounted."""
        if self._unshare(_CLONE_NEWNS) != 0:
            code = ctypes.get_errno()
            raise LaunchFailed(f"{LAUNCH_FAILED_MARKER}: mount namespace: {os.strerror(code)}")
        try:
            for merged, options, failed in _encoded(overlays):
                if self._mount(b"lw-overlay", merged, b"overlay", 0, options) != 0:
                    reason = os.strerror(ctypes.get_errno())
                    raise LaunchFailed(failed.decode("utf-8", "replace") + reason)
            yield
        finally:
            if self._setns(self._base_fd, _CLONE_NEWNS) != 0:  # pragma: no cover
                raise OSError(ctypes.get_errno(), "cannot leave a sandbox's mount namespace")
