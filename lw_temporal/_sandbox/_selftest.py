"""Fail closed: before a worker serves its first command, prove the backend holds here.

A kernel, a container runtime or a missing package can quietly take away what the
backend promises (a seccomp filter that did not load, a network namespace that was
not made, a read-only bind that is writable, commands running as host root, a
libseccomp that compiles a rule into something else). One short probe command
through the real runner checks each of them, on the host side where it can (the
owner of a file the probe made, its allocated blocks, a loopback listener nobody may
reach), and any failure refuses the backend with the reason.

The filter's own rules are proven by raw calls only that filter refuses (a
container's profile makes ``Seccomp: 2`` true of every process): a socket call with a
high bit set in its family, ``MSG_FASTOPEN``, a ``KEEP_SIZE`` allocation and, on
Landlock, an IP socket. They run in the system view's ``python3`` (one interpreter
start, about 15 ms); a view without one fails the test, since nothing else there can
make a raw call. ``open_tree_attr`` (a plain one only opens the folder, where the
kernel has the call) proves the rules libseccomp could not name but by number.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import uuid
from pathlib import Path, PurePosixPath

from .._mode import Mode
from . import _seccomp
from ._backends import Backend, SandboxUnavailable, UnsandboxedBackend
from ._identity import SandboxUser
from ._landlock import LandlockBackend
from ._output import OutputSink
from ._run import run_sandboxed
from ._spec import Limits, SandboxMount, SandboxSpec
from ._tree import remove_tree

_PROBE = PurePosixPath("/mnt/probe")


#: (probe name, what the filter refuses, the errno it answers) on every backend.
_REFUSED = (
    ("vsock-high", "socket(AF_VSOCK | 1 << 32)", "EPERM"),
    ("fastopen", "sendto(MSG_FASTOPEN)", "EPERM"),
    ("keep-size", "fallocate(FALLOC_FL_KEEP_SIZE)", "EOPNOTSUPP"),
    ("open-tree-attr", "open_tree_attr (named by number)", "EPERM"),
)
_LANDLOCK_REFUSED = (("ip", "socket(AF_INET, SOCK_STREAM)", "EPERM"),)
#: The raw calls, one ``name=<errno>`` line each (0: the call went through).
_CALLS = """import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(name, nr, *args):
    ok = libc.syscall(ctypes.c_long(nr), *(ctypes.c_long(a) for a in args)) >= 0
    print(name + '=' + str(0 if ok else ctypes.get_errno()))
pair, byte = (ctypes.c_int * 2)(), ctypes.create_string_buffer(1)
call('pair', {socketpair}, 1, 1, 0, ctypes.addressof(pair))
call('fastopen', {sendto}, pair[0], ctypes.addressof(byte), 1, 0x20000000, 0, 0)
call('keep-size', {fallocate}, os.open('falloc', os.O_WRONLY | os.O_CREAT, 0o600), 1, 0, 1 << 20)
call('vsock-high', {socket}, 40 | 1 << 32, 1, 0)
call('ip', {socket}, 2, 1, 0)
dot = ctypes.create_string_buffer(b'.')
call('open-tree-attr', {open_tree_attr}, -100, ctypes.addressof(dot), 0o2000000, 0, 0)
"""


def _script(port: int) -> str:
    names = ("socket", "socketpair", "sendto", "open_tree_attr")
    numbers = {n: _seccomp.syscall_number(n) for n in names}
    calls = _CALLS.format(fallocate=_seccomp.syscall_number("fallocate"), **numbers)
    quoted = "'" + calls.replace("'", "'\\''") + "'"
    return "\n".join(
        (
            "grep '^Seccomp:' /proc/self/status | tr -d ' \\t'",
            "echo open-files=$(ulimit -Hn)",
            "(echo x > /mnt/probe/ro/new) 2>/dev/null && echo ro-writable",
            "(echo x >> /mnt/probe/ro/old) 2>/dev/null && echo ro-writable",
            "echo x > /mnt/probe/rw/made || echo rw-refused",
            f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo network-open",
            f"if command -v python3 >/dev/null; then python3 -I -S -c {quoted}; "
            "else echo no-python3; fi",
            "echo probe-done",
        )
    )


async def self_test(
    backend: Backend, state: Path, user: SandboxUser | None, limits: Limits
) -> None:
    """Raise :class:`SandboxUnavailable` naming each guarantee that does not hold."""
    if isinstance(backend, UnsandboxedBackend):
        return  # it promises nothing
    work = state / "sandbox" / f"selftest-{uuid.uuid4().hex}"
    ro, rw = work / "ro", work / "rw"
    for folder in (ro, rw, work / "out"):
        folder.mkdir(parents=True)
    (ro / "old").write_text("unchanged\n")
    if user is not None:
        user.own(rw)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.setblocking(False)
        spec = SandboxSpec(
            argv=("/bin/bash", "-c", _script(listener.getsockname()[1])),
            cwd=_PROBE / "rw",
            mounts=(
                SandboxMount(ro, _PROBE / "ro", Mode.RO),
                SandboxMount(rw, _PROBE / "rw", Mode.RW),
            ),
            limits=limits,
            timeout=30,
            private_dir=None if backend.has_mount_view else work / "private",
            user=user,
        )
        if spec.private_dir is not None:
            spec.private_dir.mkdir()
        out = OutputSink(1 << 14, 0, work / "out" / "stdout")
        err = OutputSink(1 << 14, 0, work / "out" / "stderr")
        outcome = await run_sandboxed(backend, spec, out, err, use_pids_cgroup=False)
        failures = _failures(outcome.launch_failed, bytes(out.head), rw, ro, user)
        if not failures:
            failures = _filter_failures(bytes(out.head), rw, isinstance(backend, LandlockBackend))
        if not failures and f"open-files={limits.open_files}\n" not in bytes(out.head).decode():
            failures.append("the command's rlimits are not in force")
        with contextlib.suppress(BlockingIOError):
            listener.accept()[0].close()
            failures.append("the network is open (a loopback connection was accepted)")
    finally:
        listener.close()
        with contextlib.suppress(OSError):
            remove_tree(work)
    if failures:
        detail = bytes(err.head).decode(errors="replace").strip()
        raise SandboxUnavailable(
            f"the {backend.name} self-test failed: {'; '.join(failures)}"
            + (f" (stderr: {detail[:400]})" if detail else "")
        )


def _failures(
    launch_failed: str | None, out: bytes, rw: Path, ro: Path, user: SandboxUser | None
) -> list[str]:
    if launch_failed is not None:
        return [launch_failed]
    text = out.decode(errors="replace")
    failures = []
    if "probe-done" not in text:
        failures.append("the probe command did not finish")
    if "Seccomp:2" not in text:
        failures.append("no seccomp filter is in force")
    if "ro-writable" in text or (ro / "new").exists() or (ro / "old").read_text() != "unchanged\n":
        failures.append("a read-only mount is writable")
    if "network-open" in text:
        failures.append("the network is open")
    made = rw / "made"
    if not made.exists():
        failures.append("a read-write mount is not writable")
    elif os.geteuid() == 0 and made.stat().st_uid == 0:
        failures.append("commands run as host root")
    elif user is not None and made.stat().st_uid != user.uid:
        failures.append(f"commands do not run as the sandbox user {user.uid}")
    return failures


def _filter_failures(out: bytes, rw: Path, landlock: bool) -> list[str]:
    """What of the filter's own rules did not hold (the probe's raw calls)."""
    text = out.decode(errors="replace")
    if "no-python3" in text.split():
        return [
            "the probe found no python3 in the system view to make its raw calls with "
            "(install one under /usr: Debian/Ubuntu apt-get install python3)"
        ]
    seen = dict(line.split("=", 1) for line in text.split() if "=" in line)
    failures = []
    if seen.get("pair") != "0":
        failures.append(f"socketpair(AF_UNIX, SOCK_STREAM) failed (errno {seen.get('pair')})")
    for name, call, code in (*_REFUSED, *(_LANDLOCK_REFUSED if landlock else ())):
        if seen.get(name) != str(getattr(errno, code)):
            failures.append(
                f"the seccomp filter does not refuse {call} with {code} "
                f"(got errno {seen.get(name, 'nothing')})"
            )
    with contextlib.suppress(FileNotFoundError):
        if (rw / "falloc").stat().st_blocks:
            failures.append("a KEEP_SIZE fallocate allocated disk past RLIMIT_FSIZE")
    return failures
