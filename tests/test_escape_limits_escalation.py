"""Escape class: raising its own limits and making kernel objects without end. A
command tries to raise every hard rlimit, to lower its nice value, to make user,
network and mount namespaces (``unshare``), to mount and unmount, to change its
personality and to reach the kernel keyrings; then it makes eventfds, timerfds and
inotify instances until the kernel refuses. On the host: every raise and call was
refused, the limits the next command gets are the worker's, and another agent's
command at once after gets its own descriptors and inotify instance (the counters
are per uid, and each agent is a uid of its own under a root worker)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests._escape_support import BACKENDS, WORKER, running, shell_quote

OTHER = "pipeline_lo/sub-runs/run_cr@1/steps/step_1"

RAISE = (
    "ulimit -Hn 1048576; echo nofile=$?; ulimit -Hu 1000000; echo nproc=$?; "
    "ulimit -Hf unlimited; echo fsize=$?; ulimit -Hv unlimited; echo as=$?; "
    "ulimit -Hc unlimited; echo core=$?; python3 -c 'import os; os.nice(-5)'; echo nice=$?; "
    "unshare -U true; echo userns=$?; unshare -n true; echo netns=$?; "
    "unshare -m true; echo mntns=$?; mount -t tmpfs none /tmp; echo mount=$?; "
    "umount /proc; echo umount=$?"
)
_CALLS = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def show(name, r):
    print(f"{name}={0 if r >= 0 else ctypes.get_errno()}")
show('personality', libc.personality(0x0040000))
show('keyctl', libc.syscall(250, 0, -3, 0, 0, 0))
show('add_key', libc.syscall(248, b'user', b'x', b'y', 1, -3))
show('request_key', libc.syscall(249, b'user', b'x', 0, -3))
show('setrlimit_up', libc.syscall(160, 7, ctypes.byref((ctypes.c_ulong * 2)(1 << 20, 1 << 20))))
"""
_FLOOD = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
kept = []
for name, make in (('eventfd', lambda: os.eventfd(0)),
                   ('timerfd', lambda: libc.timerfd_create(1, 0)),
                   ('inotify', lambda: libc.inotify_init1(0))):
    n = 0
    while n < 100000:
        try:
            fd = make()
        except OSError:
            break
        if fd < 0:
            break
        kept.append(fd)
        n += 1
    print(name, n)
    for fd in kept:
        os.close(fd)
    kept.clear()
"""
OTHER_COMMAND = (
    "python3 -c 'import ctypes, os; l = ctypes.CDLL(None); "
    'print("inotify", l.inotify_init1(0) >= 0, "eventfd", os.eventfd(0) >= 0)\'; '
    "ulimit -Hn; nice"
)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_command_cannot_raise_its_limits_or_exhaust_others(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    async with running(dev_env, data_dir, backend) as (bash, _):
        raised, calls, flood, limits_after = await bash.run(
            WORKER,
            [
                RAISE,
                f"python3 -c {shell_quote(_CALLS)}",
                f"python3 -c {shell_quote(_FLOOD)}",
                "ulimit -Hn; ulimit -Hu; nice",
            ],
            timeout_seconds=60,
        )
        other = await bash.one(OTHER, OTHER_COMMAND)
    for name in ("nofile", "nproc", "fsize", "as", "core", "nice", "userns", "netns", "mntns"):
        assert f"{name}=0" not in raised.stdout, (name, raised.stdout)
        assert f"{name}=" in raised.stdout
    assert "mount=0" not in raised.stdout and "umount=0" not in raised.stdout
    for name in ("personality", "keyctl", "add_key", "request_key", "setrlimit_up"):
        assert f"{name}=" in calls.stdout and f"{name}=0" not in calls.stdout, calls.stdout
    counts = dict(line.split() for line in flood.stdout.splitlines())
    assert all(int(n) < 100000 for n in counts.values()), counts  # the kernel said no
    # The next command has the limits the worker gives, not what the last one asked for.
    nofile, nproc, nice = limits_after.stdout.split()
    worker_nice = str(os.nice(0))  # commands run at the worker's own niceness
    assert int(nofile) <= 1024 * 64 and nproc != "unlimited" and nice == worker_nice
    # Another agent right after has its own descriptors and inotify instance.
    assert other.exit_code == 0, other
    assert other.stdout.startswith("inotify True eventfd True\n"), other.stdout
    assert other.stdout.split()[-1] == worker_nice  # nice unchanged
