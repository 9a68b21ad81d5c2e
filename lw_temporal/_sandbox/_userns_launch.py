"""Overlay launcher of a worker without ``CAP_SYS_ADMIN``: enter a user and mount
namespace of its own (root mapped to the worker's user), make its mounts private, mount
the command's overlays, then exec the sandbox (bwrap).

Run as ``python -I -S _userns_launch.py SPEC -- ARGV...``: standard library only, a
fresh process that the worker starts with ``vfork`` and exec, so no at-fork hook of
any library the worker loaded runs first (a hook that starts a thread in a forked
child, as OpenTelemetry's batch processor does, leaves a process no user namespace can
be made from). SPEC is JSON: ``report`` (the runner's report pipe, closed on the exec,
so the command never holds it), ``uid``/``gid`` (whom root maps to) and ``overlays``
(staging folder, store folder, overlay options, the failure message's start). A step
that fails writes the launch-failure marker and why to the report pipe and exits with
the launch-failure status, as the sandbox's other launch steps do.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
#: Must equal ``._userns.LAUNCH_FAILED_STATUS`` (this file imports nothing of the package).
LAUNCH_FAILED_STATUS = 125
#: What a ``volatile`` overlay leaves in its work folder, deepest first.
VOLATILE_MARKER = (
    "work/work/incompat/volatile/dirty",
    "work/work/incompat/volatile",
    "work/work/incompat",
)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.unshare.argtypes = [ctypes.c_int]
_libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]


def _fail(report: int, message: str, code: int = 0) -> None:
    reason = os.strerror(code) if code else "unknown error"
    with contextlib.suppress(OSError):
        os.write(report, f"{message}{reason}\n".encode("utf-8", "backslashreplace"))
    os._exit(LAUNCH_FAILED_STATUS)


def main() -> None:
    spec = json.loads(sys.argv[1])
    argv = sys.argv[3:]
    report: int = spec["report"]
    marker: str = spec["marker"]
    if _libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        _fail(report, f"{marker}: user and mount namespace: ", ctypes.get_errno())
    for path, data in (
        ("/proc/self/setgroups", "deny"),
        ("/proc/self/uid_map", f"0 {spec['uid']} 1"),
        ("/proc/self/gid_map", f"0 {spec['gid']} 1"),
    ):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.write(fd, data.encode())
            finally:
                os.close(fd)
        except OSError as err:
            _fail(report, f"{marker}: user namespace id map: ", err.errno or 0)
    if _libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        _fail(report, f"{marker}: private mounts: ", ctypes.get_errno())
    for staging, source, options, failed in spec["overlays"]:
        try:
            os.chdir(os.fsencode(staging))
        except OSError as err:
            _fail(report, failed, err.errno or 0)
        if _libc.mount(os.fsencode(source), b"lower", None, MS_BIND, None) != 0:
            _fail(report, failed, ctypes.get_errno())
        for index, path in enumerate(VOLATILE_MARKER):
            with contextlib.suppress(OSError):
                os.unlink(path) if index == 0 else os.rmdir(path)
        if _libc.mount(b"lw-overlay", b"merged", b"overlay", 0, os.fsencode(options)) != 0:
            _fail(report, failed, ctypes.get_errno())
    os.chdir("/")
    os.set_inheritable(report, False)
    try:
        os.execv(argv[0], argv)
    except OSError as err:
        _fail(report, f"{marker}: {argv[0]}: ", err.errno or 0)


if __name__ == "__main__":
    try:
        main()
    except BaseException:  # anything else: still a launch failure, never a traceback
        _fail(json.loads(sys.argv[1])["report"], "lw-sandbox: launch failed: namespace setup: ")
