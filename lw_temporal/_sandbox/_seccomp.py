"""The seccomp filter every sandboxed command runs under, built with libseccomp.

A deny list on top of the namespaces (bwrap) or Landlock: what Docker's default
profile and the agent sandboxes (Codex, sandbox-runtime) refuse a command, and on
Landlock also every kernel interface it cannot police. libseccomp (through the
``pyseccomp`` bindings) resolves syscall numbers per architecture, refuses other
architectures' entry points (``int 0x80``, x32) and compiles the rules to BPF; the
filter is exported once per worker and handed to bwrap (``--seccomp FD``) or loaded by
the Landlock launcher right before its exec.

Denied everywhere (``EPERM`` unless said otherwise):

* kernel keyrings (``add_key``, ``keyctl``, ``request_key``);
* other processes' memory and descriptors (``ptrace``, ``process_vm_*``, ``kcmp``,
  ``pidfd_getfd``);
* kernel attack surface an agent never needs: ``bpf``, ``perf_event_open``,
  ``userfaultfd``, ``io_uring_*``, ``kexec_*``, module loading, ``open_by_handle_at``,
  ``syslog``, ``acct``, ``reboot``, swap, clocks, ``quotactl``, ``vhangup``, ioperm;
* the mount family (``mount``, ``umount2``, ``pivot_root``, ``chroot``, the new mount
  API) and namespaces (``unshare``, ``setns``, ``clone`` with any ``CLONE_NEW*`` flag;
  ``clone3`` answers ``ENOSYS``, as in Docker, so libc falls back to ``clone``);
* ``personality`` with any flag (``ADDR_NO_RANDOMIZE``, ``READ_IMPLIES_EXEC``...);
* terminal injection: ``ioctl`` ``TIOCSTI`` and ``TIOCLINUX``;
* sockets of the families ``AF_NETLINK``, ``AF_PACKET``, ``AF_VSOCK`` (and ``AF_KEY``);
* privilege in files: ``chmod``/``mkdir``/``open``/``mknod`` with the setuid or setgid
  bit, ``mknod`` of a device (``fchmodat2`` and ``openat2``, whose modes the filter
  cannot read, answer ``ENOSYS``, and libc falls back).

Denied on Landlock only (bwrap's namespaces already hold these): ``socket`` other than
TCP (UDP, raw, SCTP, MPTCP) and every ``AF_UNIX`` socket (the allow list of unix
sockets is empty; ``socketpair`` still works), ``listen`` (an unbound TCP socket would
autobind on all addresses), SysV IPC and POSIX message queues (the host's), and
``prlimit64``, ``setpriority``, ``sched_set*`` and ``ioprio_set`` aimed at any process
but the caller.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import os
from enum import Enum
from typing import Any

# Flags and constants the rules compare against (Linux UAPI, all architectures).
_CLONE_NAMESPACES = (
    0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
    | 0x00000080  # CLONE_NEWTIME
)
_TIOCSTI = 0x5412
_TIOCLINUX = 0x541C
_AF_UNIX, _AF_INET, _AF_INET6 = 1, 2, 10
_AF_KEY, _AF_NETLINK, _AF_PACKET, _AF_VSOCK = 15, 16, 17, 40
_SOCK_TYPE_MASK = 0xF
_SOCK_STREAM = 1
_IPPROTO_MPTCP = 262
_SETID_BITS = 0o6000
_S_IFMT, _S_IFCHR, _S_IFBLK = 0o170000, 0o020000, 0o060000
_PERSONALITY_FLAGS = 0x10000

_DENIED = (
    "add_key",
    "keyctl",
    "request_key",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "open_by_handle_at",
    "name_to_handle_at",
    "syslog",
    "acct",
    "reboot",
    "swapon",
    "swapoff",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "quotactl",
    "quotactl_fd",
    "vhangup",
    "ioperm",
    "iopl",
    "lookup_dcookie",
    "uselib",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
    "unshare",
    "setns",
)
_NO_SUCH_CALL = ("clone3", "fchmodat2", "openat2")
_LANDLOCK_DENIED = (
    "listen",
    "shmget",
    "shmat",
    "shmctl",
    "shmdt",
    "semget",
    "semop",
    "semtimedop",
    "semctl",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "mq_open",
    "mq_unlink",
    "mq_timedsend",
    "mq_timedreceive",
    "mq_notify",
    "mq_getsetattr",
)
#: (syscall, index of its pid argument): allowed only on the caller itself (0).
_OWN_PROCESS_ONLY = (
    ("prlimit64", 0),
    ("sched_setaffinity", 0),
    ("sched_setscheduler", 0),
    ("sched_setparam", 0),
    ("sched_setattr", 0),
    ("setpriority", 1),
    ("ioprio_set", 1),
)
#: (syscall, index of its mode argument) for files a command may create or chmod.
_MODE_ARGUMENT = (
    ("chmod", 1),
    ("fchmod", 1),
    ("fchmodat", 2),
    ("mkdir", 1),
    ("mkdirat", 2),
    ("open", 2),
    ("openat", 3),
    ("creat", 1),
    ("mknod", 1),
    ("mknodat", 2),
)


class Profile(Enum):
    """Which backend the filter is for (Landlock's denies more)."""

    NAMESPACES = "namespaces"
    LANDLOCK = "landlock"


class SeccompUnavailable(RuntimeError):
    """libseccomp is missing or refused the filter; the message says what to install."""


def _bindings() -> Any:
    try:
        import pyseccomp
    except (ImportError, OSError) as err:  # the bindings load libseccomp.so.2 on import
        raise SeccompUnavailable(
            f"libseccomp is not usable ({err}); install it (Debian/Ubuntu: apt-get install "
            "libseccomp2) and the project's Python dependencies (pyseccomp)"
        ) from None
    return pyseccomp


def build(profile: Profile) -> Any:
    """The filter as a libseccomp context (default: allow)."""
    seccomp = _bindings()

    def _known(name: str) -> bool:
        return int(seccomp.resolve_syscall(seccomp.system_arch(), name)) >= 0

    eperm = seccomp.ERRNO(errno.EPERM)
    arg, eq, masked, ne, ge = seccomp.Arg, seccomp.EQ, seccomp.MASKED_EQ, seccomp.NE, seccomp.GE
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    deny = [*_DENIED, *(_LANDLOCK_DENIED if profile is Profile.LANDLOCK else ())]
    for name in deny:
        if _known(name):
            rules.add_rule(eperm, name)
    for name in _NO_SUCH_CALL:
        if _known(name):
            rules.add_rule(seccomp.ERRNO(errno.ENOSYS), name)
    for flag in range(32):
        if _CLONE_NAMESPACES & (1 << flag):
            rules.add_rule(eperm, "clone", arg(0, masked, 1 << flag, 1 << flag))
    rules.add_rule(eperm, "personality", arg(0, ge, _PERSONALITY_FLAGS))
    for request in (_TIOCSTI, _TIOCLINUX):
        rules.add_rule(eperm, "ioctl", arg(1, masked, 0xFFFFFFFF, request))
    families = [_AF_KEY, _AF_NETLINK, _AF_PACKET, _AF_VSOCK]
    if profile is Profile.LANDLOCK:
        families.append(_AF_UNIX)
    for family in families:
        rules.add_rule(eperm, "socket", arg(0, eq, family))
    for bit in (0o4000, 0o2000):
        for name, index in _MODE_ARGUMENT:
            if _known(name):
                rules.add_rule(eperm, name, arg(index, masked, bit, bit))
    for kind in (_S_IFCHR, _S_IFBLK):
        for name, index in (("mknod", 1), ("mknodat", 2)):
            if _known(name):
                rules.add_rule(eperm, name, arg(index, masked, _S_IFMT, kind))
    if profile is Profile.LANDLOCK:
        for family in (_AF_INET, _AF_INET6):
            for kind in (2, 3, 4, 5, 6, 10):  # every type but SOCK_STREAM
                rules.add_rule(
                    eperm, "socket", arg(0, eq, family), arg(1, masked, _SOCK_TYPE_MASK, kind)
                )
            rules.add_rule(eperm, "socket", arg(0, eq, family), arg(2, eq, _IPPROTO_MPTCP))
        for name, index in _OWN_PROCESS_ONLY:
            if _known(name):
                rules.add_rule(eperm, name, arg(index, ne, 0))
    return rules


@functools.cache
def bpf(profile: Profile) -> bytes:
    """The compiled filter (a ``sock_filter`` array), built once per worker."""
    try:
        rules = build(profile)
    except OSError as err:
        raise SeccompUnavailable(f"libseccomp refused the sandbox's filter: {err}") from None
    with os.fdopen(os.memfd_create("lw-seccomp-export", os.MFD_CLOEXEC), "w+b") as sink:
        rules.export_bpf(sink)
        sink.seek(0)
        program = sink.read()
    if not program or len(program) % 8:
        raise SeccompUnavailable("libseccomp exported an empty or malformed filter")
    return program


def check() -> None:
    """Raise :class:`SeccompUnavailable` unless both filters can be built here."""
    for profile in Profile:
        bpf(profile)


def memfd(profile: Profile) -> int:
    """A sealed in-memory file holding the filter; reopen it per command (bwrap reads
    its ``--seccomp`` descriptor to the end, so each command needs its own offset)."""
    fd = os.memfd_create(f"lw-seccomp-{profile.value}", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.write(fd, bpf(profile))
    fcntl.fcntl(
        fd,
        fcntl.F_ADD_SEALS,
        fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL,
    )
    return fd
