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
and the reason to the runner's report pipe (closed on exec, so the command never holds
it) and exits with ``LAUNCH_FAILED_STATUS`` (in the spawner thread: raises
:class:`LaunchFailed` with that text), which the caller reports as a sandbox failure.

Each overlay is mounted from inside its staging folder, with the store folder first
bound at ``lower`` there, so its options name only ``lower``, ``upper`` and ``work``:
the sandbox's ``/proc/self/mountinfo`` shows the overlay without a host path (and a
data dir whose path holds ``,`` or ``:`` needs no escaping). A ``volatile`` overlay
leaves a marker in its work folder that refuses the next mount; the mount step
removes it first (a staging set is reused only when its upper folder stayed empty).

When commands run as a separate sandbox user (a root worker), the store folder under
an overlay is owned by the worker, which the sandbox user could not write through the
overlay. So the thread path binds an idmapped copy of the store folder's mount
(host uid/gid 0 shown as the sandbox user's) as the overlay's lower layer: the
command writes as its own user, the upper folder records files it owns, and the store
itself is untouched.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
from collections.abc import Callable, Iterator
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


def _clear_volatile_marker() -> None:
    """Remove a previous volatile mount's marker (the caller is in the staging folder)."""
    for index, path in enumerate(_VOLATILE_MARKER):
        with contextlib.suppress(OSError):
            (os.unlink if index == 0 else os.rmdir)(path)


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
    def mounted(
        self, overlays: tuple[Overlay, ...], user: tuple[int, int] | None = None
    ) -> Iterator[None]:
        """Inside: the calling thread is in a fresh copy of its namespace with the
        overlays mounted; a child started there keeps that copy, nobody else sees it.
        ``user`` (uid, gid) is whom an idmapped lower layer shows the worker's files as.
        Raises :class:`LaunchFailed` when an overlay cannot be mounted."""
        if self._unshare(_CLONE_NEWNS) != 0:
            code = ctypes.get_errno()
            raise LaunchFailed(f"{LAUNCH_FAILED_MARKER}: mount namespace: {os.strerror(code)}")
        try:
            for overlay in _encoded(overlays):
                try:  # this thread's working folder is its own (unshare implies CLONE_FS)
                    os.chdir(overlay.staging)
                except OSError as err:
                    raise LaunchFailed(
                        overlay.failed.decode("utf-8", "replace") + os.strerror(err.errno or 0)
                    ) from None
                if user is not None:
                    _idmapped_bind(overlay.source, user, overlay.failed)
                elif self._mount(overlay.source, b"lower", None, _MS_BIND, None) != 0:
                    reason = os.strerror(ctypes.get_errno())
                    raise LaunchFailed(overlay.failed.decode("utf-8", "replace") + reason)
                _clear_volatile_marker()
                if self._mount(b"lw-overlay", b"merged", b"overlay", 0, overlay.options) != 0:
                    reason = os.strerror(ctypes.get_errno())
                    raise LaunchFailed(overlay.failed.decode("utf-8", "replace") + reason)
            yield
        finally:
            if self._setns(self._base_fd, _CLONE_NEWNS) != 0:  # pragma: no cover
                raise OSError(ctypes.get_errno(), "cannot leave a sandbox's mount namespace")


_SYS_OPEN_TREE = 428
_SYS_MOVE_MOUNT = 429
_SYS_MOUNT_SETATTR = 442
_OPEN_TREE_CLONE = 1
_AT_EMPTY_PATH = 0x1000
_AT_FDCWD = -100
_MOVE_MOUNT_F_EMPTY_PATH = 4
_MOUNT_ATTR_IDMAP = 0x00100000


class _MountAttr(ctypes.Structure):
    _fields_ = (
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    )


@functools.cache
def _idmap_userns(uid: int, gid: int) -> int:
    """A user namespace mapping id 0 to (uid, gid), kept open for idmapped mounts."""
    _libc()  # resolved before the fork: the child makes one system call and waits
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child only holds the namespace
        try:
            os.close(ready_r)
            os.close(done_w)
            unshare, _, _ = _libc()
            os.write(ready_w, b"1" if unshare(_CLONE_NEWUSER) == 0 else b"0")
            os.read(done_r, 1)
        finally:
            os._exit(0)
    os.close(ready_w)
    os.close(done_r)
    try:
        if os.read(ready_r, 1) != b"1":
            raise LaunchFailed(f"{LAUNCH_FAILED_MARKER}: cannot create the idmap namespace")
        for name, data in (
            ("uid_map", f"0 {uid} 1\n"),
            ("setgroups", "deny"),
            ("gid_map", f"0 {gid} 1\n"),
        ):
            with open(f"/proc/{pid}/{name}", "w") as ids:
                ids.write(data)
        return os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(done_w)
        os.close(ready_r)
        os.waitpid(pid, 0)


def _idmapped_bind(source: bytes, user: tuple[int, int], failed_prefix: bytes) -> None:
    """Mount an idmapped copy of ``source`` on ``lower`` (this thread's namespace and
    working folder)."""
    call = _syscall()
    failed = failed_prefix.decode("utf-8", "replace")
    tree = call(_SYS_OPEN_TREE, _AT_FDCWD, source, _OPEN_TREE_CLONE | os.O_CLOEXEC)
    if tree < 0:
        raise LaunchFailed(failed + os.strerror(ctypes.get_errno()))
    try:
        attr = _MountAttr(_MOUNT_ATTR_IDMAP, 0, 0, _idmap_userns(*user))
        if call(
            _SYS_MOUNT_SETATTR, tree, b"", _AT_EMPTY_PATH, ctypes.byref(attr), ctypes.sizeof(attr)
        ):
            raise LaunchFailed(failed + os.strerror(ctypes.get_errno()))
        if call(_SYS_MOVE_MOUNT, tree, b"", _AT_FDCWD, b"lower", _MOVE_MOUNT_F_EMPTY_PATH):
            raise LaunchFailed(failed + os.strerror(ctypes.get_errno()))
    finally:
        os.close(tree)


@functools.cache
def _syscall() -> _Syscall:
    libc = ctypes.CDLL(None, use_errno=True)
    call: Any = libc.syscall
    call.restype = ctypes.c_long
    return call  # type: ignore[no-any-return]
