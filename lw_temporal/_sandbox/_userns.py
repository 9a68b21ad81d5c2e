"""Overlay mounts for bwrap, made without any helper program: what both ways share,
and the way of a worker without ``CAP_SYS_ADMIN``.

bwrap 0.8 cannot mount an overlay, so the overlays are mounted in a mount namespace
that bwrap then starts from, and bwrap binds the merged folders. Two ways, by what
the worker may do:

* A worker with ``CAP_SYS_ADMIN`` (root on a host): the thread that starts the
  sandboxes keeps a mount namespace of its own and mounts the overlays there
  (:mod:`._threadmounts`); the child is a plain ``vfork`` and exec.
* Any other worker (:func:`overlay_launcher`): a small launcher program, started with
  ``vfork`` and exec like bwrap itself, enters a user and mount namespace of its own
  (root mapped to the worker's user), makes its mounts private and mounts the
  overlays before it execs bwrap (:mod:`._userns_launch`). Not a ``preexec_fn`` in a
  fork of the worker: that runs every at-fork hook the worker's libraries registered,
  and one that starts a thread (OpenTelemetry's batch processor does) leaves a child
  that cannot make a user namespace.

Either way bwrap creates its own nested user namespace as usual. A step that fails
writes ``LAUNCH_FAILED_MARKER`` and the reason to the runner's report pipe (closed on
exec, so the command never holds it) and exits with ``LAUNCH_FAILED_STATUS`` (in the
spawning thread: raises :class:`LaunchFailed` with that text), which the caller reports
as a sandbox failure.

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
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
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
_MS_REC = 0x4000
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


_LAUNCHER = Path(__file__).with_name("_userns_launch.py")


def overlay_launcher(
    overlays: tuple[Overlay, ...], report_fd: int, argv: list[str], *, idmapped: bool = False
) -> list[str]:
    """``argv`` behind the launcher that first enters a user and mount namespace and
    mounts ``overlays`` (:mod:`._userns_launch`), an exec'd program rather than a
    ``preexec_fn``: a pre-exec step runs every at-fork hook the worker's libraries
    registered, and one that starts a thread leaves a child that cannot make a user
    namespace. ``report_fd`` must reach the launcher (it closes it on its exec)."""
    if idmapped:
        raise LaunchFailed(
            f"{LAUNCH_FAILED_MARKER}: an idmapped overlay needs the spawner's own mount "
            "namespace (CAP_SYS_ADMIN)"
        )
    spec = {
        "report": report_fd,
        "marker": LAUNCH_FAILED_MARKER,
        "uid": os.geteuid(),
        "gid": os.getegid(),
        "overlays": [
            [os.fsdecode(o.staging), os.fsdecode(o.source), os.fsdecode(o.options),
             o.failed.decode("utf-8", "backslashreplace")]
            for o in _encoded(overlays)
        ],
    }  # fmt: skip
    return [sys.executable, "-I", "-S", str(_LAUNCHER), json.dumps(spec), "--", *argv]
