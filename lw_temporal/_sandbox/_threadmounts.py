"""The spawning thread's own mount namespace: overlays mounted in place, and armed.

A worker with ``CAP_SYS_ADMIN`` (root on a host) mounts each command's overlays in a
mount namespace that the thread that starts the sandboxes keeps for itself (see
:class:`ThreadMounts`), and bwrap, started by that thread, copies that namespace and
binds the merged folders. The child is a plain ``vfork`` and exec; any other worker's
child makes a namespace of its own instead (:func:`._userns.overlay_launcher`).

When commands run as a separate sandbox user (a root worker), the store folder under
an overlay is owned by the worker, which the sandbox user could not write through the
overlay. So an idmapped copy of the store folder's mount (host uid/gid 0 shown as the
sandbox user's) is bound as the overlay's lower layer: the command writes as its own
user, the upper folder records files it owns, and the store itself is untouched.

Each overlay's layers are named through a descriptor of its staging folder, with the
store folder first bound at ``lower`` there (``lowerdir=/proc/self/fd/<n>/lower``...):
the sandbox's ``/proc/self/mountinfo`` shows the overlay without a host path, and no
working folder changes on the way.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import re
import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ._exits import at_exit
from ._staging import staging_changed
from ._userns import (
    _CLONE_NEWNS,
    _CLONE_NEWUSER,
    _MS_REC,
    _MS_SLAVE,
    LAUNCH_FAILED_MARKER,
    LaunchFailed,
    Overlay,
    _clear_volatile_marker,
    _Encoded,
    _encoded,
    _libc,
    _Syscall,
)

#: A layer option of the overlay options (``lowerdir=lower``...), whose folder names
#: are relative to the staging folder.
_LAYER = re.compile(rb"((?:lowerdir|upperdir|workdir)=)([a-z]+)")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_MNT_DETACH = 2
_UMOUNT_NOFOLLOW = 8


#: Fresh overlays a thread keeps mounted for the next command of the same store.
_ARMED_MAX = 8


@dataclass(frozen=True, slots=True)
class _Mounted:
    """What is mounted at one staging folder of this thread's namespace."""

    overlay: _Encoded
    user: tuple[int, int] | None
    #: (st_dev, st_ino) of the store folder when it was bound: a folder replaced
    #: since (renamed over, or made where there was none) is bound anew.
    lower: tuple[int, int, int]


class ThreadMounts:
    """A spawning thread's own mount namespace, for a worker with ``CAP_SYS_ADMIN``.

    The thread enters it once (:meth:`of_this_thread`) and stays: a slave of the
    host's namespace, so host mounts still reach it and nothing flows back, and other
    threads (and the host) never see what is mounted there. Each command's overlays
    are mounted in place, at their staging folders, before bwrap starts (bwrap copies
    the namespace and binds the merged folders). A concurrent command's copy holds
    the other commands' overlays too, under the host root it detaches at its
    ``pivot_root``, so it never reaches them.

    When a command is over (:meth:`ended`), its overlays are unmounted after its
    result, and a staging folder whose upper layer stayed empty (the one a next
    command reuses) gets a fresh overlay of the same store right away, **armed**: the
    next command of that store starts without waiting for a mount. An armed overlay
    is one no process has used: nothing of the store is cached in it, so it shows the
    store as it is when the command starts, as a fresh mount would (changes the
    commits make to the store meanwhile included). A store folder replaced since is
    mounted anew.

    Entering changes the calling thread only, and for good: its mount namespace, and
    with it (the kernel ties them) its root, working folder and umask, which other
    threads' ``chdir``/``umask`` no longer change (this module never changes them:
    it mounts through descriptors and returns to the working folder it found)."""

    _local: threading.local | None = None

    def __init__(self) -> None:
        _, self._mount, _ = _libc()
        self._mounted: dict[bytes, _Mounted] = {}
        #: Staging folders (of ``_mounted``) holding an armed overlay, oldest first.
        self._armed: dict[bytes, None] = {}
        #: Staging folders (of ``_mounted``) whose command is over, to settle.
        self._ended: set[bytes] = set()

    @classmethod
    def of_this_thread(cls) -> ThreadMounts | None:
        """The calling thread's (entered on first use); ``None`` when the worker may
        not (then each child makes its own namespace: :func:`._userns.overlay_launcher`)."""
        if cls._local is None:  # made on first use: workflow sandboxes import this module
            cls._local = threading.local()
        if not hasattr(cls._local, "mounts"):
            cls._local.mounts = cls._enter()
        mounts: ThreadMounts | None = cls._local.mounts
        return mounts

    @classmethod
    def existing(cls) -> ThreadMounts | None:
        """The calling thread's, if it has entered one (never enters)."""
        return getattr(cls._local, "mounts", None) if cls._local is not None else None

    @classmethod
    def _enter(cls) -> ThreadMounts | None:
        unshare, mount, setns = _libc()
        host_fd = os.open("/proc/thread-self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        try:
            if unshare(_CLONE_NEWNS) != 0:
                return None
            if mount(None, b"/", None, _MS_REC | _MS_SLAVE, None) != 0:
                if setns(host_fd, _CLONE_NEWNS) != 0:
                    raise OSError(ctypes.get_errno(), "cannot return to the host mounts")
                return None
        finally:
            os.close(host_fd)
        mounts = cls()
        if threading.current_thread() is threading.main_thread():
            # before the exit handlers remove the staging folders these are mounted on
            at_exit(mounts.release_all)
        return mounts

    def mount(self, overlays: tuple[Overlay, ...], user: tuple[int, int] | None = None) -> None:
        """Have ``overlays`` mounted at their staging folders: an armed one as it is,
        the others now (all or none: raises :class:`LaunchFailed` when one cannot be
        mounted). ``user`` (uid, gid) is whom an idmapped lower layer shows the
        worker's files as."""
        done: list[bytes] = []
        try:
            for overlay in _encoded(overlays):
                if not self._take_armed(overlay, user):
                    self.release(overlay.staging)
                    self._mount_one(overlay, user)
                done.append(overlay.staging)
        except BaseException:
            for staging in done:
                self.release(staging)
            raise

    def ended(
        self, overlays: tuple[Overlay, ...], later: Callable[[Callable[[], None]], Any]
    ) -> None:
        """The command that used ``overlays`` is over: settle them through ``later``
        (e.g. the event loop's ``call_soon``, which runs it after the result is back)."""
        ended = [o.staging for o in _encoded(overlays) if o.staging in self._mounted]
        if ended:
            self._ended.update(ended)
            later(self.settle)

    def settle(self) -> None:
        """Unmount the ended commands' overlays, arming a fresh one on each staging
        folder whose upper layer stayed empty (the caller removes the others)."""
        ended, self._ended = self._ended, set()
        for staging in ended:
            used = self._mounted.pop(staging, None)
            if used is None:
                continue
            _unmount([used.overlay])
            if staging_changed(os.fsdecode(staging)):
                continue
            if self._armed and len(self._armed) >= _ARMED_MAX:  # the oldest goes
                self.release(next(iter(self._armed)))
            if len(self._armed) >= _ARMED_MAX:
                continue
            with contextlib.suppress(LaunchFailed, OSError):
                self._mount_one(used.overlay, used.user)
                self._armed[staging] = None

    def release(self, staging: bytes) -> None:
        """Unmount whatever is mounted at ``staging`` here (before it is reused for
        another store or removed)."""
        self._armed.pop(staging, None)
        self._ended.discard(staging)
        mounted = self._mounted.pop(staging, None)
        if mounted is not None:
            _unmount([mounted.overlay])

    def release_overlays(self, overlays: tuple[Overlay, ...]) -> None:
        for overlay in _encoded(overlays):
            self.release(overlay.staging)

    def release_under(self, root: bytes) -> None:
        """Unmount everything mounted here at a staging folder below ``root``."""
        for staging in [s for s in self._mounted if s.startswith(root.rstrip(b"/") + b"/")]:
            self.release(staging)

    def release_all(self) -> None:
        for staging in list(self._mounted):
            self.release(staging)

    def _take_armed(self, overlay: _Encoded, user: tuple[int, int] | None) -> bool:
        if overlay.staging not in self._armed:
            return False
        armed = self._mounted[overlay.staging]
        if armed.overlay != overlay or armed.user != user or armed.lower != _identity(overlay):
            return False
        del self._armed[overlay.staging]
        return True

    def _mount_one(self, overlay: _Encoded, user: tuple[int, int] | None) -> None:
        failed = overlay.failed.decode("utf-8", "replace")
        try:
            staging = os.open(overlay.staging, _DIR_FLAGS)
        except OSError as err:
            raise LaunchFailed(failed + os.strerror(err.errno or 0)) from None
        try:
            lower = _identity(overlay)
            _bind_lower(overlay.source, staging, user, failed)
            _clear_volatile_marker(staging)
            # The layers are named through the staging folder's descriptor, so the
            # sandbox's mountinfo shows no host path, and no working folder changes
            # (the threads this one creates share its working folder).
            base = b"/proc/self/fd/%d/" % staging
            options = _LAYER.sub(lambda m: m.group(1) + base + m.group(2), overlay.options)
            status = self._mount(b"lw-overlay", base + b"merged", b"overlay", 0, options)
            code = ctypes.get_errno()
            if status != 0:
                _detach(overlay.staging + b"/lower")
                raise LaunchFailed(failed + os.strerror(code))
        finally:
            os.close(staging)
        self._mounted[overlay.staging] = _Mounted(overlay, user, lower)


def release_staging(folder: os.PathLike[str] | str) -> None:
    """Before a staging folder is removed or used for another store's command: unmount
    what the calling thread (the one that ran its commands) keeps mounted on it."""
    mounts = ThreadMounts.existing()
    if mounts is not None:
        mounts.release(os.fsencode(folder))


def _identity(overlay: _Encoded) -> tuple[int, int, int]:
    """The store folder's device, inode and group (a new group needs a new idmap)."""
    try:
        st = os.stat(overlay.source)
    except OSError:
        return (-1, -1, -1)
    return (st.st_dev, st.st_ino, st.st_gid)


def _unmount(overlays: Sequence[_Encoded]) -> None:
    for overlay in overlays:
        _detach(overlay.staging + b"/merged")
        _detach(overlay.staging + b"/lower")


def _detach(path: bytes) -> None:
    _umount2()(path, _MNT_DETACH | _UMOUNT_NOFOLLOW)


@functools.cache
def _umount2() -> _Syscall:
    umount2: Any = ctypes.CDLL(None, use_errno=True).umount2
    umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    umount2.restype = ctypes.c_int
    return umount2  # type: ignore[no-any-return]


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


#: User namespaces kept open for idmapped mounts, by (uid, gid, kept group), least recently used
#: first: one per agent a worker ran commands of lately (a mount made with one keeps
#: its own reference, so an evicted one's descriptor is simply closed).
_USERNS: dict[tuple[int, int, int], int] = {}
_USERNS_MAX = 64


def _idmap_userns(uid: int, gid: int, keep: int = 0) -> int:
    """A user namespace mapping id 0 to (uid, gid), and group ``keep`` (a store root's
    own group, when it has one) to itself, kept open for idmapped mounts: a file whose
    group an idmapped mount cannot map is one the worker, which mounts the overlay and
    copies files up, could not pass."""
    fd = _USERNS.pop((uid, gid, keep), None)
    if fd is None:
        fd = _new_userns(uid, gid, keep)
        while len(_USERNS) >= _USERNS_MAX:
            os.close(_USERNS.pop(next(iter(_USERNS))))
    _USERNS[(uid, gid, keep)] = fd
    return fd


def _new_userns(uid: int, gid: int, keep: int) -> int:
    """A new user namespace with those maps, by descriptor.

    Its holder is made by ``clone(CLONE_NEWUSER)`` and runs libc's ``sleep`` on a stack
    of its own: no Python code runs in it, so no library's at-fork hook does either
    (``os.fork`` runs them, and OpenTelemetry's batch processor starts a thread there,
    which leaves nothing a user namespace can be made from). It lives while the ids
    are written, is then killed, and ends by itself within a minute if this process dies."""
    pid = _namespace_holder()
    try:
        for name, data in (
            ("uid_map", f"0 {uid} 1\n"),
            ("setgroups", "deny"),
            ("gid_map", f"0 {gid} 1\n" + (f"{keep} {keep} 1\n" if keep and keep != gid else "")),
        ):
            with open(f"/proc/{pid}/{name}", "w") as ids:
                ids.write(data)
        return os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as err:
        raise LaunchFailed(
            f"{LAUNCH_FAILED_MARKER}: cannot map the idmap namespace: {err.strerror}"
        ) from None
    finally:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


_HOLDER_STACK = 64 * 1024
_HOLDER_SECONDS = 60


def _namespace_holder() -> int:
    """The pid of a new child in a user namespace of its own, asleep (see above)."""
    libc = ctypes.CDLL(None, use_errno=True)
    clone: Any = libc.clone
    clone.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    clone.restype = ctypes.c_int
    stack = ctypes.create_string_buffer(_HOLDER_STACK)  # the child runs on its own copy
    top = (ctypes.addressof(stack) + _HOLDER_STACK) & ~15
    sleep = ctypes.cast(libc.sleep, ctypes.c_void_p)
    flags = _CLONE_NEWUSER | signal.SIGCHLD
    pid: int = clone(sleep, top, flags, ctypes.c_void_p(_HOLDER_SECONDS))
    if pid <= 0:
        reason = os.strerror(ctypes.get_errno())
        raise LaunchFailed(f"{LAUNCH_FAILED_MARKER}: cannot create the idmap namespace: {reason}")
    return pid


def _bind_lower(source: bytes, staging: int, user: tuple[int, int] | None, failed: str) -> None:
    """Mount a copy of ``source``'s mount (idmapped to ``user`` when given) on ``lower``
    in the staging folder ``staging`` (a descriptor), in the calling thread's namespace."""
    call = _syscall()
    tree = call(_SYS_OPEN_TREE, _AT_FDCWD, source, _OPEN_TREE_CLONE | os.O_CLOEXEC)
    if tree < 0:
        raise LaunchFailed(failed + os.strerror(ctypes.get_errno()))
    try:
        if user is not None:
            try:
                keep = os.stat(source).st_gid
            except OSError:
                keep = 0
            attr = _MountAttr(_MOUNT_ATTR_IDMAP, 0, 0, _idmap_userns(*user, keep))
            if call(
                _SYS_MOUNT_SETATTR,
                tree,
                b"",
                _AT_EMPTY_PATH,
                ctypes.byref(attr),
                ctypes.sizeof(attr),
            ):
                raise LaunchFailed(failed + os.strerror(ctypes.get_errno()))
        if call(_SYS_MOVE_MOUNT, tree, b"", staging, b"lower", _MOVE_MOUNT_F_EMPTY_PATH):
            raise LaunchFailed(failed + os.strerror(ctypes.get_errno()))
    finally:
        os.close(tree)


@functools.cache
def _syscall() -> _Syscall:
    libc = ctypes.CDLL(None, use_errno=True)
    call: Any = libc.syscall
    call.restype = ctypes.c_long
    return call  # type: ignore[no-any-return]
