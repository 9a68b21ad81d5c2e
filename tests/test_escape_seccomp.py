"""Escape class: kernel interfaces beyond files. Every call Docker's default profile
and the agent sandboxes deny is refused by the seccomp filter on both backends (the
filter's own EPERM/ENOSYS, not a later check), every socket family and protocol
outside the backend's allow list, and on Landlock also every socket and IPC kind
Landlock cannot police (IP sockets, unix sockets but stream pairs, bind and listen,
renicing other processes of the uid). On the host: the worker's limits, its SysV IPC and
its health are unchanged."""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import resource
import subprocess
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal._sandbox._idrange import DEFAULT_IDS
from tests._escape_support import BACKENDS, WORKER, running, syscall

EPERM, ENOSYS = errno.EPERM, errno.ENOSYS

#: (name, python expression, expected errno) on every backend (x86_64 numbers).
EVERYWHERE = [
    ("io_uring_setup", "libc.syscall(425, 8, None)", EPERM),
    ("userfaultfd", "libc.syscall(323, 0)", EPERM),
    ("perf_event_open", "libc.syscall(298, None, 0, -1, -1, 0)", EPERM),
    ("keyctl", "libc.syscall(250, 0, -3, 0)", EPERM),
    ("add_key", "libc.syscall(248, b'user', b'k', b'v', 1, -3)", EPERM),
    ("request_key", "libc.syscall(249, b'user', b'k', None, -3)", EPERM),
    ("bpf", "libc.syscall(321, 0, None, 0)", EPERM),
    ("memfd_secret", "libc.syscall(447, 0)", EPERM),
    ("ptrace", "libc.syscall(101, 0, 0, 0, 0)", EPERM),
    ("process_vm_readv", "libc.syscall(310, 1, None, 0, None, 0, 0)", EPERM),
    ("kexec_load", "libc.syscall(246, 0, 0, None, 0)", EPERM),
    ("finit_module", "libc.syscall(313, 0, b'', 0)", EPERM),
    ("mount", "libc.syscall(165, b'none', b'/tmp', b'tmpfs', 0, None)", EPERM),
    ("umount2", "libc.syscall(166, b'/proc', 0)", EPERM),
    ("open_tree", "libc.syscall(428, -100, b'/', 1)", EPERM),
    ("unshare", "libc.syscall(272, 0x10000000)", EPERM),
    ("setns", "libc.syscall(308, 0, 0)", EPERM),
    ("clone3", "libc.syscall(435, None, 0)", ENOSYS),
    ("personality", "libc.syscall(135, 0x0040000)", EPERM),
    ("tiocsti", "fcntl.ioctl(0, 0x5412, b'x')", EPERM),
    ("tioclinux", "fcntl.ioctl(0, 0x541C, b'x')", EPERM),
    ("tiocsetd", "fcntl.ioctl(0, 0x5423, bytes(4))", EPERM),
    ("vsock", "socket.socket(40, socket.SOCK_STREAM)", EPERM),
    ("netlink", "socket.socket(16, socket.SOCK_RAW, 0)", EPERM),
    ("packet", "socket.socket(17, socket.SOCK_RAW, 0)", EPERM),
    ("alg", "socket.socket(38, socket.SOCK_SEQPACKET, 0)", EPERM),
    ("xdp", "socket.socket(44, socket.SOCK_RAW, 0)", EPERM),
    ("netlink-pair", "socket.socketpair(16, socket.SOCK_RAW, 0)", EPERM),
    ("raw-ip", "socket.socket(2, socket.SOCK_RAW, 255)", EPERM),
    ("icmp", "socket.socket(2, socket.SOCK_DGRAM, 1)", EPERM),
    ("sctp", "socket.socket(2, socket.SOCK_STREAM, 132)", EPERM),
    ("mptcp", "socket.socket(2, 1, 262)", EPERM),
]
#: What Landlock cannot police, refused there too.
LANDLOCK_ONLY = [
    ("tcp", "socket.socket(2, socket.SOCK_STREAM)", EPERM),
    ("tcp6", "socket.socket(10, socket.SOCK_STREAM)", EPERM),
    ("udp", "socket.socket(2, socket.SOCK_DGRAM)", EPERM),
    ("udp6", "socket.socket(10, socket.SOCK_DGRAM)", EPERM),
    ("unix", "socket.socket(1, socket.SOCK_STREAM)", EPERM),
    ("unix-dgram-pair", "socket.socketpair(1, socket.SOCK_DGRAM)", EPERM),
    ("bind-abstract", "socket.socketpair()[0].bind(b'\\0lw-squat')", EPERM),
    ("listen", "socket.socketpair()[0].listen(1)", EPERM),
    ("setpriority-user", "libc.syscall(141, 2, 0, 19)", EPERM),
    ("ioprio-user", "libc.syscall(251, 3, 0, 0)", EPERM),
    ("shmget", "libc.syscall(29, 0, 4096, 0o1600)", EPERM),
    ("semget", "libc.syscall(64, 0, 1, 0o1600)", EPERM),
    ("msgget", "libc.syscall(68, 0, 0o1600)", EPERM),
    ("mq_open", "libc.syscall(240, b'lw', 0o100 | 2, 0o600, None)", EPERM),
]


def _sysv_ids() -> set[str]:
    """The host's SysV objects a command could have made: those of the user commands
    run as (the sandbox user under a root worker, else the worker's), so another
    process of the host making its own meanwhile changes nothing here."""
    owners = {str(u) for u in DEFAULT_IDS} if os.geteuid() == 0 else {str(os.geteuid())}
    with contextlib.suppress(KeyError):
        if os.geteuid() != 0:
            owners.add(pwd.getpwuid(os.geteuid()).pw_name)
    listing = subprocess.run(["ipcs"], capture_output=True, text=True, check=False).stdout
    return {
        line for line in listing.splitlines() if line.split()[2:3] and line.split()[2] in owners
    }


@pytest.mark.parametrize("backend", BACKENDS)
async def test_denied_kernel_interfaces(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    probes = EVERYWHERE + (LANDLOCK_ONLY if backend == "landlock" else [])
    worker_pid = os.getpid()
    probes.append(
        (
            "prlimit-worker",
            f"libc.syscall(302, {worker_pid}, 7, (ctypes.c_ulong * 2)(12, 12), None)",
            EPERM,
        )
    )
    limits_before = resource.getrlimit(resource.RLIMIT_NOFILE)
    ipc_before = _sysv_ids()
    async with running(dev_env, data_dir, backend) as (bash, _):
        results = await bash.run(
            WORKER,
            [
                "grep '^Seccomp:' /proc/self/status",
                " ; ".join(syscall(name, expr) for name, expr, _ in probes),
                "echo alive",
            ],
        )
    status, probe, alive = results
    assert status.stdout.split() == ["Seccomp:", "2"], status
    seen = dict(line.split("=", 1) for line in probe.stdout.split())
    for name, _, expected in probes:
        if name == "prlimit-worker" and backend == "bwrap":
            expected = errno.ESRCH  # the worker is not even in the sandbox's pid namespace
        assert seen.get(name) == str(expected), (name, seen.get(name), probe.stderr)
    assert alive.stdout == "alive\n"
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == limits_before
    assert _sysv_ids() == ipc_before


@pytest.mark.parametrize("backend", BACKENDS)
async def test_allowed_work_is_not_caught_by_the_filter(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    async with running(dev_env, data_dir, backend) as (bash, _):
        result = await bash.one(
            WORKER,
            'python3 -c \'import socket, os; a, b = socket.socketpair(); a.send(b"ok"); '
            'print(b.recv(2).decode()); os.chmod("f", 0o600) if os.path.exists("f") else 0\' '
            "&& mkdir -p d && chmod 755 d && (sleep 0.1 & wait) && echo fine",
        )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "ok\nfine\n"
