"""The seccomp filter every sandboxed command runs under, built with libseccomp.

A deny list on top of the namespaces (bwrap) or Landlock: what Docker's default
profile and the agent sandboxes (Codex, sandbox-runtime) refuse a command, and on
Landlock also every kernel interface it cannot police. libseccomp (through the
``pyseccomp`` bindings) resolves syscall numbers per architecture and compiles the
rules to BPF, the calls in a binary tree (a call walks about 25 instructions to its
rules, however many there are; a linear list made it 75 to 100). A call through
another architecture's entry point (``int 0x80``, x32 numbers) kills the process that
makes it (``SIGSYS``). The filter is exported once per worker and handed to bwrap
(``--seccomp FD``) or loaded by the Landlock launcher right before its exec.

**Arguments are compared as the kernel reads them.** A seccomp filter sees all 64 bits
of every register, while the kernel reads an ``int`` argument's low 32 only: an
``EQ 40`` rule does not match ``40 | 1 << 32``, which the kernel takes for 40. So every
rule on an ``int``/``unsigned int`` argument is a masked comparison of its low bits
or an ordered one whose refused range reaches the top of the 64-bit space, and a call
with any of the high 32 bits set in such an argument is refused (``EPERM``, or the
``EOPNOTSUPP`` the call's other refusals answer; no value these arguments take is
negative, so a libc passes them zero-extended). The one exception is ``ioctl``'s
request number, which musl sign-extends: its rules compare the low 32 bits only (the
kernel ignores the rest). Where the kernel interface is open-ended the rules are allow
lists, written as the deny rules that cover everything else (:func:`_outside`).

Denied everywhere (``EPERM`` unless said otherwise):

* kernel keyrings (``add_key``, ``keyctl``, ``request_key``);
* other processes' memory and descriptors (``ptrace``, ``process_vm_*``, ``kcmp``,
  ``pidfd_getfd``);
* kernel attack surface an agent never needs: ``bpf``, ``perf_event_open``,
  ``userfaultfd``, ``io_uring_*``, ``kexec_*``, module loading, ``open_by_handle_at``,
  ``syslog``, ``acct``, ``reboot``, swap, clocks, ``quotactl``, ``vhangup``, ioperm,
  ``modify_ldt``, ``memfd_secret`` (pages taken out of the kernel's own map, which
  no reclaim can touch);
* the mount family (``mount``, ``umount2``, ``pivot_root``, ``chroot``, the new mount
  API, ``open_tree_attr`` included: named by number where libseccomp is older than
  it) and namespaces (``unshare``, ``setns``, ``clone`` with any ``CLONE_NEW*`` flag;
  ``clone3``, whose flags sit in a struct the filter cannot read, answers ``ENOSYS``,
  as in Docker, so libc falls back to ``clone``);
* ``personality`` with any flag (``ADDR_NO_RANDOMIZE``, ``READ_IMPLIES_EXEC``...);
* terminal injection and line disciplines: ``ioctl`` ``TIOCSTI``, ``TIOCLINUX``,
  ``TIOCSETD``;
* every socket but the backend's allow list (:data:`SOCKETS`): by family, type and
  protocol, for ``socket`` and ``socketpair``;
* TCP Fast Open, which connects from ``sendto`` past a ``connect()`` check:
  ``MSG_FASTOPEN`` on ``sendto``/``sendmsg``/``sendmmsg``, ``TCP_FASTOPEN_CONNECT``;
  and ``TCP_ULP`` (kernel TLS and other upper-layer protocols);
* disk allocation that ``RLIMIT_FSIZE`` does not see (``EOPNOTSUPP``, so programs fall
  back to writing): ``fallocate`` with any mode but 0 (checked against the limit) and
  ``PUNCH_HOLE | KEEP_SIZE`` (frees space), and the preallocation ioctls
  ``FS_IOC_RESVSP``/``RESVSP64``/``ZERO_RANGE`` (``KEEP_SIZE`` allocations);
* privilege in files: ``chmod``/``mkdir``/``mknod`` and a creating ``open`` with the
  setuid or setgid bit, ``mknod`` of a device (``fchmodat2`` and ``openat2``, whose
  modes the filter cannot read, answer ``ENOSYS``, and libc falls back).

Denied on Landlock only (bwrap's namespaces already hold these): every IP socket and
every ``AF_UNIX`` socket but a ``socketpair`` stream (see :data:`SOCKETS`), ``bind``
(a pair's end could squat a name in the host's abstract namespace) and ``listen``,
SysV IPC and POSIX message queues (the host's), file watches (``inotify_add_watch``,
``fanotify_*``: Landlock does not check the watched path, so a watch on any host folder
the uid may read reports the names of the files made there), ``setpriority`` and
``ioprio_set`` other than on the caller's own process, and ``prlimit64`` and
``sched_set*`` aimed at any process but the caller. A command with a network policy
has TCP sockets whose ``connect`` goes to the connect broker (``LANDLOCK_NETWORK``);
under bwrap the broker stacks a one-rule filter of its own
(:func:`connect_broker_bpf`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Any

# Flags and constants the rules compare against (Linux UAPI, x86_64 and arm64).
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
#: Above this, an argument has one of its high 32 bits set.
LOW32 = 0xFFFFFFFF
_U64 = (1 << 64) - 1
_TIOCSTI, _TIOCLINUX, _TIOCSETD = 0x5412, 0x541C, 0x5423
#: FS_IOC_RESVSP, FS_IOC_RESVSP64, FS_IOC_ZERO_RANGE: fallocate with KEEP_SIZE by ioctl.
_PREALLOCATE_IOCTLS = (0x40305828, 0x4030582A, 0x40305839)
AF_UNIX, AF_INET, AF_INET6 = 1, 2, 10
SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET = 1, 2, 5
_SOCK_TYPE_MASK = 0xF
IPPROTO_TCP, IPPROTO_UDP = 6, 17
MSG_FASTOPEN = 0x20000000
_TCP_FASTOPEN_CONNECT, _TCP_ULP = 30, 31
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 0x01, 0x02
#: fallocate modes RLIMIT_FSIZE bounds: 0 (the limit is checked as the file grows) and
#: punching a hole (frees space).
_FALLOCATE_MODES = (0, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)
_O_CREAT, _O_TMPFILE = 0o100, 0o20000000  # __O_TMPFILE: O_TMPFILE without O_DIRECTORY
_SETID_BITS = (0o4000, 0o2000)
_S_IFMT, _S_IFCHR, _S_IFBLK = 0o170000, 0o020000, 0o060000
_PERSONALITY_FLAGS = 0x10000
_PRIO_PROCESS, _IOPRIO_WHO_PROCESS = 0, 1

#: Socket kinds a command may create: family -> type (``SOCK_*`` without its flags)
#: -> protocols. Anything else is refused, whatever the kernel was built with.
SocketTable = Mapping[int, Mapping[int, frozenset[int]]]
_UNIX_PROTOCOLS = frozenset({0, AF_UNIX})  # 0 or PF_UNIX
_UNIX_ANY: SocketTable = {
    AF_UNIX: dict.fromkeys((SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET), _UNIX_PROTOCOLS)
}
_IP_LOCAL: SocketTable = {
    family: {SOCK_STREAM: frozenset({0, IPPROTO_TCP}), SOCK_DGRAM: frozenset({0, IPPROTO_UDP})}
    for family in (AF_INET, AF_INET6)
}


class Profile(Enum):
    """Which backend the filter is for (Landlock's denies more), and on Landlock
    whether the command has a network policy."""

    NAMESPACES = "namespaces"
    LANDLOCK = "landlock"
    LANDLOCK_NETWORK = "landlock-network"


#: (``socket`` table, ``socketpair`` table) per profile.
#:
#: bwrap: the command's network namespace is empty, so TCP and UDP reach only its own
#: loopback and unix sockets only what its mount view and its own abstract namespace
#: hold; programs need both for IPC among their own processes (servers on 127.0.0.1,
#: multiprocessing, test runners). Raw, ICMP, SCTP, MPTCP and every other
#: family (netlink, packet, vsock, alg, xdp, tipc, rds, can, bluetooth, kcm...) are
#: refused: they reach the host (vsock), need capabilities the command lacks, or are
#: kernel attack surface.
#:
#: Landlock: the host's network stack and abstract namespace, so no IP socket at all
#: (TCP Fast Open, UDP, MPTCP and raw sockets would pass Landlock's TCP ``connect``
#: check) and no ``socket(AF_UNIX)`` (up to Landlock ABI 8 a pathname socket such as
#: the D-Bus system bus is reachable whatever the file rules say; ABI 9's
#: ``LANDLOCK_ACCESS_FS_RESOLVE_UNIX`` is the way to allow them later). A
#: ``socketpair`` stream is what multiprocessing and event loops need and names
#: nothing; a datagram pair is refused (``sendto`` with an address would reach host
#: pathname sockets such as ``/dev/log``).
#:
#: Landlock with a network policy (an egress proxy): the same, plus TCP sockets
#: (``AF_INET``/``AF_INET6`` ``SOCK_STREAM``) whose every ``connect`` is answered by
#: the sandbox's connect broker (``SECCOMP_RET_USER_NOTIF``, see ``_netbroker``): a
#: connection to the proxy's address becomes one to the proxy, anything else is
#: refused, and Landlock, which handles TCP connect with no port allowed, refuses
#: whatever the broker would let through. Landlock's rules name ports, never
#: addresses, so a port rule for the proxy would also open that port on every host
#: the worker can route to; the broker names the address. ``MSG_FASTOPEN`` stays
#: refused (it connects from ``sendto``, past any ``connect`` check).
_LANDLOCK_PAIRS: SocketTable = {
    AF_UNIX: dict.fromkeys((SOCK_STREAM, SOCK_SEQPACKET), _UNIX_PROTOCOLS)
}
SOCKETS: dict[Profile, tuple[SocketTable, SocketTable]] = {
    Profile.NAMESPACES: ({**_UNIX_ANY, **_IP_LOCAL}, _UNIX_ANY),
    Profile.LANDLOCK: ({}, _LANDLOCK_PAIRS),
    Profile.LANDLOCK_NETWORK: (
        {family: {SOCK_STREAM: frozenset({0, IPPROTO_TCP})} for family in (AF_INET, AF_INET6)},
        _LANDLOCK_PAIRS,
    ),
}

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
    "modify_ldt",
    "lookup_dcookie",
    "memfd_secret",
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
    "open_tree_attr",
    "mount_setattr",
    "unshare",
    "setns",
)
_NO_SUCH_CALL = ("clone3", "fchmodat2", "openat2")
#: Calls of the lists above newer than some libseccomp releases (2.5.4, Debian 12's,
#: names none past 456): by number where it cannot name them, or a kernel that has
#: them (6.15+ for ``open_tree_attr``) would run them, since the filter allows what
#: it does not name. Every architecture numbers the calls made since Linux 5.1 alike.
_UNIFIED_NUMBERS = {"open_tree_attr": 467}
_LANDLOCK_DENIED = (
    "bind",
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
    # Landlock does not check a watch's path: inotify and fanotify would report the
    # names of files made in any host folder the uid may read, outside every rule.
    "inotify_add_watch",
    "fanotify_init",
    "fanotify_mark",
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
    ("creat", 1),
    ("mknod", 1),
    ("mknodat", 2),
)
#: (syscall, index of its flags, index of its mode): the mode counts only when the
#: flags create a file (O_CREAT, O_TMPFILE); otherwise the kernel ignores it.
_OPEN_MODE = (("open", 1, 2), ("openat", 2, 3))
#: (syscall, index of its flags argument) of the calls that send.
_SEND_FLAGS = (("sendto", 3), ("sendmsg", 2), ("sendmmsg", 3))


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


#: One comparison of one argument: (op, datum_a, datum_b) in libseccomp's terms.
Comparison = tuple[int, int, int]


def _outside(allowed: Iterable[int], mask: int = _U64) -> list[Comparison]:
    """Comparisons that, one per rule, together match every value of ``arg & mask``
    not in ``allowed``: how an allow list is written in a filter whose default is to
    allow (libseccomp takes one comparison per argument per rule). With the full
    64-bit mask the top range is an ordered ``GT``, so a value with any high bit set
    is always outside; the gaps between allowed values are aligned blocks, each a
    masked comparison."""
    seccomp = _bindings()
    values = sorted({v & mask for v in allowed})
    if not values:
        raise ValueError("an allow list needs at least one value (deny the call instead)")
    top = mask
    gaps, start = [], 0
    for value in values:
        if value > start:
            gaps.append((start, value - 1))
        start = value + 1
    if start <= top:
        gaps.append((start, top))
    found: list[Comparison] = []
    for low, high in gaps:
        if mask == _U64 and high == top:
            found.append((seccomp.GT, low - 1, 0))
            continue
        while low <= high:
            size = low & -low if low else 1 << mask.bit_length()
            while low + size - 1 > high:
                size >>= 1
            found.append((seccomp.MASKED_EQ, mask & ~(size - 1), low))
            low += size
    return found


def build(profile: Profile) -> Any:
    """The filter as a libseccomp context (default: allow)."""
    seccomp = _bindings()

    eperm, unsupported = seccomp.ERRNO(errno.EPERM), seccomp.ERRNO(errno.EOPNOTSUPP)
    arg, masked, ne, ge, gt = seccomp.Arg, seccomp.MASKED_EQ, seccomp.NE, seccomp.GE, seccomp.GT
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    rules.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.KILL_PROCESS)
    with contextlib.suppress(OSError):  # libseccomp 2.5+: a binary tree of the calls
        rules.set_attr(seccomp.Attr.CTL_OPTIMIZE, 2)
    landlock = profile in (Profile.LANDLOCK, Profile.LANDLOCK_NETWORK)

    def deny(name: str, *args: Any, action: int = eperm) -> None:
        number = syscall_number(name)
        if number >= 0:
            rules.add_rule(action, number, *args)

    def high_bits(name: str, *indexes: int) -> None:
        for index in indexes:
            deny(name, arg(index, gt, LOW32))

    for name in (*_DENIED, *(_LANDLOCK_DENIED if landlock else ())):
        deny(name)
    for name in _NO_SUCH_CALL:
        deny(name, action=seccomp.ERRNO(errno.ENOSYS))
    high_bits("clone", 0)
    for flag in range(32):
        if _CLONE_NAMESPACES & (1 << flag):
            deny("clone", arg(0, masked, 1 << flag, 1 << flag))
    deny("personality", arg(0, ge, _PERSONALITY_FLAGS))  # high bits included
    for request in (_TIOCSTI, _TIOCLINUX, _TIOCSETD):
        deny("ioctl", arg(1, masked, LOW32, request))
    for request in _PREALLOCATE_IOCTLS:
        deny("ioctl", arg(1, masked, LOW32, request), action=unsupported)
    for op, a, b in _outside(_FALLOCATE_MODES):  # high bits included
        deny("fallocate", arg(1, op, a, b), action=unsupported)
    for call, table in zip(("socket", "socketpair"), SOCKETS[profile], strict=True):
        _socket_rules(call, table, deny)
    for name, index in _SEND_FLAGS:
        high_bits(name, index)
        deny(name, arg(index, masked, MSG_FASTOPEN, MSG_FASTOPEN))
    high_bits("setsockopt", 1, 2)
    for option in (_TCP_FASTOPEN_CONNECT, _TCP_ULP):
        deny("setsockopt", arg(1, masked, LOW32, IPPROTO_TCP), arg(2, masked, LOW32, option))
    for name, index in _MODE_ARGUMENT:
        high_bits(name, index)
        for bit in _SETID_BITS:
            deny(name, arg(index, masked, bit, bit))
    for name, flags, mode in _OPEN_MODE:
        high_bits(name, flags)
        for creating in (_O_CREAT, _O_TMPFILE):
            deny(name, arg(flags, masked, creating, creating), arg(mode, gt, LOW32))
            for bit in _SETID_BITS:
                deny(name, arg(flags, masked, creating, creating), arg(mode, masked, bit, bit))
    for kind in (_S_IFCHR, _S_IFBLK):
        for name, index in (("mknod", 1), ("mknodat", 2)):
            deny(name, arg(index, masked, _S_IFMT, kind))
    if profile is Profile.LANDLOCK_NETWORK:
        rules.add_rule(seccomp.NOTIFY, "connect")
    if landlock:
        for name, index in _OWN_PROCESS_ONLY:
            deny(name, arg(index, ne, 0))  # a pid: high bits included
        deny("setpriority", arg(0, ne, _PRIO_PROCESS))  # not PRIO_PGRP/PRIO_USER
        deny("ioprio_set", arg(0, ne, _IOPRIO_WHO_PROCESS))
    return rules


def _socket_rules(call: str, table: SocketTable, deny: Any) -> None:
    """Deny rules for ``call`` (``socket``/``socketpair``) that leave only ``table``:
    a family outside it, a type outside the family's, a protocol outside the type's."""
    seccomp = _bindings()
    arg = seccomp.Arg
    if not table:
        deny(call)
        return
    for op, a, b in _outside(table):
        deny(call, arg(0, op, a, b))
    deny(call, arg(1, seccomp.GT, LOW32))  # the type's checks below read its low bits
    for family, kinds in table.items():
        family_is = arg(0, seccomp.EQ, family)
        for op, a, b in _outside(kinds, _SOCK_TYPE_MASK):
            deny(call, family_is, arg(1, op, a, b))
        for kind, protocols in kinds.items():
            kind_is = arg(1, seccomp.MASKED_EQ, _SOCK_TYPE_MASK, kind)
            for op, a, b in _outside(protocols):
                deny(call, family_is, kind_is, arg(2, op, a, b))


@functools.cache
def bpf(profile: Profile) -> bytes:
    """The compiled filter (a ``sock_filter`` array), built once per worker."""
    try:
        rules = build(profile)
    except OSError as err:
        raise SeccompUnavailable(f"libseccomp refused the sandbox's filter: {err}") from None
    return _export(rules)


@functools.cache
def connect_broker_bpf() -> bytes:
    """A filter of one rule, ``connect`` answered by a listener (the connect broker):
    stacked by bwrap's broker on the command, above the filter bwrap loaded."""
    seccomp = _bindings()
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    rules.add_rule(seccomp.NOTIFY, "connect")
    return _export(rules)


def _export(rules: Any) -> bytes:
    with os.fdopen(os.memfd_create("lw-seccomp-export", os.MFD_CLOEXEC), "w+b") as sink:
        rules.export_bpf(sink)
        sink.seek(0)
        program = sink.read()
    if not program or len(program) % 8:
        raise SeccompUnavailable("libseccomp exported an empty or malformed filter")
    return program


def syscall_number(name: str) -> int:
    """``name``'s number on this machine (negative when it has no such call), the
    unified one for a call libseccomp is older than (:data:`_UNIFIED_NUMBERS`)."""
    seccomp = _bindings()
    number = int(seccomp.resolve_syscall(seccomp.system_arch(), name))
    return number if number >= 0 else _UNIFIED_NUMBERS.get(name, number)


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
