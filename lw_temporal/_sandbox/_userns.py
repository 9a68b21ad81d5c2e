"""Overlay mounts for bwrap, made without any helper program: what both ways share,
and the way of a worker without ``CAP_SYS_ADMIN``.

bwrap 0.8 cannot mount an overlay, so the overlays are mounted in a mount namespace
that bwrap then starts from, and bwrap binds the merged folders. Two ways, by what
the worker may do:

* A worker with ``CAP_SYS_ADMIN`` (root on a host): the thread that starts the
  sandboxes keeps a mount namespace of its own and mounts the overlays there
  (:mod:`._threadmounts`); the child is a plain ``vfork`` and exec.
* Any other worker (:class:`OverlayNamespace`): the forked child enters a user and
  mount namespace of its own (root mapped to the worker's user), makes its mounts
  private and mounts the overlays before it execs bwrap. The child must be a full
  ``fork`` of the worker (``preexec_fn``), which costs more.

Either way bwrap creates its own nested user namespace as usual. Everything the child
needs (the libc functions, every path and option string, the messages) is prepared
before the fork: the child runs between fork and exec of a threaded process, where it
should do nothing but system calls. A step that fails writes ``LAUNCH_FAILED_MARKER``
and the reason to the runner's report pipe (closed on exec, so the command never holds
it) and exits with ``LAUNCH_FAILED_STATUS`` (in the spawning thread: raises
:class:`LaunchFailed` with that text), which the caller reports as a sandbox failure.

Each overlay is mounted from inside its staging folder, with the store folder first
bound at ``lower`` there, so its options name only ``lower``, ``upper`` and ``work``:
the sandbox's ``/proc/self/mountinfo`` shows the overlay without a host path (and a
data dir whose path holds ``,`` or ``:`` needs no escaping). A ``volatile`` overlay
leaves a marker in its work folder that refuses the next mount; the mount step
removes it first (a staging set is reused only when its upper folder stayed empty).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Exit status and stderr marker of a failed sandbox launch (not the command's own).
LAUNCH_FAILED_STATUS = 125
LAUNCH_FAILED_MARKER = "lw-sandbox: launch failed"

#: One overlay: (target the command sees, merged folder, overlay mount options
#: relative to the merged folder's parent (the staging folder), and the store folder,
#: bound at ``<staging>/lower`` before the overlay is mounted).
Overlay = tuple[str, str, str, str]

#: What a ``volatile`` overlay leaves in its work folder, deepest first.
_VOLATILE_MARKER = (
    b"work/work/incompat/volatile/dirty",
    b"work/work/incompat/volatile",
    b"work/work/incompat",
)

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_BIND = 0x1000
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


@dataclass(frozen=True, slots=True)
class _Encoded:
    """One overlay as the mount step needs it, all bytes (encoded before any fork);
    the messages name the target the command sees, never a host path."""

    staging: bytes
    source: bytes
    options: bytes
    failed: bytes


def _encoded(overlays: tuple[Overlay, ...]) -> tuple[_Encoded, ...]:
    return tuple(
        _Encoded(
            os.fsencode(os.path.dirname(merged)),
            os.fsencode(source),
            options.encode("utf-8", "surrogateescape"),
            f"{LAUNCH_FAILED_MARKER}: overlay mount for {target}: ".encode(
                "utf-8", "backslashreplace"
            ),
        )
        for target, merged, options, source in overlays
    )


def _clear_volatile_marker(staging: int | None = None) -> None:
    """Remove a previous volatile mount's marker (in the staging folder ``staging``, a
    descriptor, or else the working folder)."""
    for index, path in enumerate(_VOLATILE_MARKER):
        with contextlib.suppress(OSError):
            if index == 0:
                os.unlink(path, dir_fd=staging)
            else:
                os.rmdir(path, dir_fd=staging)


class OverlayNamespace:
    """A ``preexec_fn``: enter a user and mount namespace, mount the overlays."""

    def __init__(
        self, overlays: tuple[Overlay, ...], report_fd: int = 2, *, idmapped: bool = False
    ) -> None:
        if idmapped:
            raise LaunchFailed(
                f"{LAUNCH_FAILED_MARKER}: an idmapped overlay needs the spawner's own mount "
                "namespace (CAP_SYS_ADMIN)"
            )
        self._report_fd = report_fd
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
        for overlay in self._overlays:
            try:
                os.chdir(overlay.staging)
            except OSError as err:
                self._fail(overlay.failed, err.errno or 0)
            if self._mount(overlay.source, b"lower", None, _MS_BIND, None) != 0:
                self._fail(overlay.failed, ctypes.get_errno())
            _clear_volatile_marker()
            if self._mount(b"lw-overlay", b"merged", b"overlay", 0, overlay.options) != 0:
                self._fail(overlay.failed, ctypes.get_errno())
        os.chdir(b"/")

    def _fail(self, message: bytes, code: int) -> None:
        reason = self._reasons.get(code, self._unknown) if code else b""
        try:
            os.write(self._report_fd, message + reason)
        finally:
            os._exit(LAUNCH_FAILED_STATUS)
