"""Escape class: what the filter compares. The kernel reads an ``int`` argument's low
32 bits, so the filter must compare those and refuse a call with any high bit set
(the first pass compared all 64: ``socket(AF_VSOCK | 1 << 32)`` passed an ``EQ 40``
rule and made a vsock socket). Through the real ``lw.bash`` activity on both
backends: raw calls with high bits in every argument the filter decides on are
refused; only the backend's socket allow list can be made (every family, type and
protocol swept); Landlock makes no IP socket and no unix socket that could name a
host service, and TCP Fast Open is closed; no ``fallocate`` mode or preallocation
ioctl allocates disk that ``RLIMIT_FSIZE`` does not see; another architecture's entry
point ends the command. Checked on the host: listeners on TCP, UDP, a world-writable
pathname unix socket and an abstract one receive nothing, a squatted abstract name
stays free, nothing was allocated, no setuid file exists, and ordinary programs
(multiprocessing, asyncio, posix_fallocate) still work."""

from __future__ import annotations

import asyncio
import ctypes
import errno
import os
import platform
import shutil
import socket
import stat
import tempfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal._sandbox._seccomp import syscall_number
from tests._escape_support import BACKENDS, WORKER, raw_calls, running, shell_quote

EPERM, EOPNOTSUPP = errno.EPERM, errno.EOPNOTSUPP
AF_UNIX, AF_INET = socket.AF_UNIX, socket.AF_INET

#: Buffers the probes below point at (``ptr`` is the prelude's).
SETUP = """fd = os.open('f', os.O_RDWR | os.O_CREAT, 0o600)
pair = (ctypes.c_int * 2)()
libc.socketpair(1, 1, 0, pair)
one = ptr(struct.pack('i', 1))
resv = ptr(struct.pack('hh4xqqiI16x', 0, 0, 0, 1 << 30, 0, 0))
"""
#: (name, syscall, arguments, errno) refused on both backends: every argument the
#: filter compares, with a high bit set (``H`` = 1 << 32, ``TOP`` = all 32 high bits).
HIGH_BITS = [
    ("socket-vsock", "socket", "40 | H, 1, 0", EPERM),
    ("socket-vsock-top", "socket", "40 | TOP, 1, 0", EPERM),
    ("socket-netlink", "socket", "16 | H, 3, 0", EPERM),
    ("socket-packet", "socket", "17 | H, 3, 0", EPERM),
    ("socket-xdp", "socket", "44 | H, 3, 0", EPERM),
    ("socket-unix", "socket", "1 | H, 1, 0", EPERM),
    ("socket-udp-type", "socket", "2, 2 | H, 0", EPERM),
    ("socket-tcp-protocol", "socket", "2, 1, 6 | H", EPERM),
    ("socketpair-family", "socketpair", "1 | H, 1, 0, ptr()", EPERM),
    ("socketpair-type", "socketpair", "1, 1 | H, 0, ptr()", EPERM),
    ("clone-newuser", "clone", "0x10000011 | H, 0, 0, 0, 0", EPERM),
    ("clone-plain", "clone", "0x11 | H, 0, 0, 0, 0", EPERM),
    ("unshare", "unshare", "0x10000000 | H", EPERM),
    ("personality", "personality", "0x0040000 | H", EPERM),
    ("tiocsti", "ioctl", "0, 0x5412 | H, ptr()", EPERM),
    ("tiocsti-top", "ioctl", "0, 0x5412 | TOP, ptr()", EPERM),
    ("tioclinux", "ioctl", "0, 0x541C | H, ptr()", EPERM),
    ("tiocsetd", "ioctl", "0, 0x5423 | H, one", EPERM),
    ("sendto-fastopen", "sendto", "pair[0], ptr(b'x'), 1, 0x20000000 | H, 0, 0", EPERM),
    ("sendto-flags", "sendto", "pair[0], ptr(b'x'), 1, H, 0, 0", EPERM),
    ("sendmsg-fastopen", "sendmsg", "pair[0], ptr(), 0x20000000 | H", EPERM),
    ("sendmmsg-fastopen", "sendmmsg", "pair[0], ptr(), 1, 0x20000000 | H", EPERM),
    ("tfo-connect-level", "setsockopt", "pair[0], 6 | H, 30, one, 4", EPERM),
    ("tfo-connect-name", "setsockopt", "pair[0], 6, 30 | H, one, 4", EPERM),
    ("tcp-ulp", "setsockopt", "pair[0], 6, 31 | H, ptr(b'tls'), 3", EPERM),
    ("open-setuid", "openat", "-100, ptr(b'suid'), 0o101, 0o4755 | H", EPERM),
    ("open-mode", "openat", "-100, ptr(b'plain'), 0o101, 0o644 | H", EPERM),
    ("open-tmpfile-setgid", "openat", "-100, ptr(b'.'), 0o20200002, 0o2755 | H", EPERM),
    ("chmod-setgid", "fchmodat", "-100, ptr(b'f'), 0o2755 | H, 0", EPERM),
    ("chmod-mode", "fchmodat", "-100, ptr(b'f'), 0o600 | H, 0", EPERM),
    ("mknod-setuid", "mknodat", "-100, ptr(b'node'), 0o104755 | H, 0", EPERM),
    ("fallocate-keep-size", "fallocate", "fd, 1 | H, 0, 1 << 30", EOPNOTSUPP),
    ("fallocate-mode-0", "fallocate", "fd, H, 0, 1 << 30", EOPNOTSUPP),
    ("resvsp64", "ioctl", "fd, 0x4030582A | H, resv", EOPNOTSUPP),
    ("resvsp64-top", "ioctl", "fd, 0x4030582A | TOP, resv", EOPNOTSUPP),
]
#: The side doors themselves, without a high bit, on both backends.
SIDE_DOORS = [
    ("fastopen-sendto", "sendto", "pair[0], ptr(b'x'), 1, 0x20000000, 0, 0", EPERM),
    ("fastopen-sendmsg", "sendmsg", "pair[0], ptr(), 0x20000000", EPERM),
    ("fastopen-sendmmsg", "sendmmsg", "pair[0], ptr(), 1, 0x20004000", EPERM),
    ("fastopen-connect", "setsockopt", "pair[0], 6, 30, one, 4", EPERM),
    ("ulp", "setsockopt", "pair[0], 6, 31, ptr(b'tls'), 3", EPERM),
    *[
        (f"fallocate-{name}", "fallocate", f"fd, {mode}, 0, 1 << 30", EOPNOTSUPP)
        for name, mode in (
            ("keep-size", 0x01),
            ("punch-alone", 0x02),
            ("collapse", 0x08),
            ("zero-range", 0x10),
            ("zero-range-keep", 0x11),
            ("insert", 0x20),
            ("unshare", 0x40),
            ("write-zeroes", 0x80),
        )
    ],
    ("resvsp", "ioctl", "fd, 0x40305828, resv", EOPNOTSUPP),
    ("resvsp64", "ioctl", "fd, 0x4030582A, resv", EOPNOTSUPP),
    ("zero-range-ioctl", "ioctl", "fd, 0x40305839, resv", EOPNOTSUPP),
    ("tiocsetd", "ioctl", "0, 0x5423, one", EPERM),
    ("modify-ldt", "modify_ldt", "0, ptr(), 16", EPERM),
    ("open-tmpfile-setuid", "openat", "-100, ptr(b'.'), 0o20200002, 0o4755", EPERM),
]
#: Landlock only: what bwrap's namespaces make harmless is refused there.
LANDLOCK_HIGH_BITS = [
    ("prlimit-self", "prlimit64", "H, 7, 0, ptr()", EPERM),  # pid 0 as the kernel reads it
    ("setpriority-user", "setpriority", "2 | H, 0, 19", EPERM),  # PRIO_USER
    ("setpriority-user-low", "setpriority", "2, 0, 19", EPERM),  # every process of the uid
    ("ioprio-user", "ioprio_set", "3, 0, 0", EPERM),  # IOPRIO_WHO_USER
    ("socket-tcp", "socket", "2, 1, 0", EPERM),
    ("socket-tcp6", "socket", "10, 1, 0", EPERM),
]
#: What each backend lets through, as (call, family, type, protocol), stated here
#: independently of the filter's own tables.
_UNIX = {(AF_UNIX, kind, proto) for kind in (1, 2, 5) for proto in (0, 1)}
_IP = {(fam, 1, proto) for fam in (2, 10) for proto in (0, 6)}
_IP |= {(fam, 2, proto) for fam in (2, 10) for proto in (0, 17)}
ALLOWED = {
    "bwrap": {("socket", *k) for k in _UNIX | _IP} | {("socketpair", *k) for k in _UNIX},
    "landlock": {("socketpair", AF_UNIX, kind, proto) for kind in (1, 5) for proto in (0, 1)},
}
SWEEP = """out = []
for call in ('socket', 'socketpair'):
    for family in range(64):
        for kind in (1, 2, 3, 4, 5, 6, 10):
            for proto in (0, 1, 6, 17, 58, 132, 136, 262):
                fds = (ctypes.c_int * 2)(-1, -1)
                args = [family, kind | 0o2000000, proto]
                args += [ctypes.addressof(fds)] * (call == 'socketpair')
                r = libc.syscall(ctypes.c_long(N[call]), *(ctypes.c_long(a) for a in args))
                for fd in (r,) if call == 'socket' else (*fds,) if r == 0 else ():
                    if fd >= 0:
                        os.close(fd)
                if r < 0 and ctypes.get_errno() == 1:
                    continue
                out.append(f'{call},{family},{kind},{proto}')
print('made', *out)
"""


def _host_raw(call: str, *args: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return int(libc.syscall(ctypes.c_long(syscall_number(call)), *map(ctypes.c_long, args)))


def test_the_kernel_reads_only_the_low_32_bits_here() -> None:
    """The attack is real on this kernel: unfiltered, a family with a high bit set
    makes a socket of the family in the low 32 bits."""
    fd = _host_raw("socket", AF_UNIX | 1 << 32, socket.SOCK_STREAM, 0)
    assert fd >= 0, ctypes.get_errno()
    with socket.socket(fileno=fd) as made:
        assert made.family == AF_UNIX


@pytest.mark.parametrize("backend", BACKENDS)
async def test_high_bits_and_side_doors_are_refused(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    probes = HIGH_BITS + SIDE_DOORS + (LANDLOCK_HIGH_BITS if backend == "landlock" else [])
    async with running(dev_env, data_dir, backend) as (bash, plugin):
        scratch = plugin.config.scope_of(WORKER, "lw.Worker").own_scratch
        probe, alive = await bash.run(
            WORKER, [raw_calls([p[:3] for p in probes], SETUP), "echo alive"]
        )
        seen = dict(line.split("=", 1) for line in probe.stdout.split())
        for name, _, _, expected in probes:
            assert seen.get(name) == str(expected), (name, seen.get(name), probe.stderr)
        assert alive.stdout == "alive\n"
        assert (scratch / "f").stat().st_blocks == 0, "disk was allocated"
        for path in scratch.rglob("*"):
            mode = path.lstat().st_mode
            assert not mode & (stat.S_ISUID | stat.S_ISGID), path
            assert stat.S_ISREG(mode) or stat.S_ISDIR(mode), path


@pytest.mark.parametrize("backend", BACKENDS)
async def test_only_the_allowed_sockets_can_be_made(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    sweep = raw_calls([], SWEEP, numbers_of=("socket", "socketpair"))
    async with running(dev_env, data_dir, backend) as (bash, _):
        result = await bash.one(WORKER, sweep)
    assert result.exit_code == 0, result.stderr
    line = next(ln for ln in result.stdout.splitlines() if ln.startswith("made"))
    made = {
        (call, *map(int, numbers))
        for call, *numbers in (item.split(",") for item in line.split()[1:])
    }
    assert made == ALLOWED[backend], made ^ ALLOWED[backend]


@dataclass
class HostListeners:
    """Sockets on the host a command must not reach, all non-blocking: whatever
    arrived is still queued when the commands are over."""

    tcp: socket.socket
    udp: socket.socket
    folder: Path
    unix_stream: socket.socket
    unix_dgram: socket.socket
    abstract: str
    abstract_stream: socket.socket
    abstract_dgram: socket.socket
    squat: str = field(default_factory=lambda: f"lw-squat-{uuid.uuid4().hex}")

    def arrived(self) -> list[str]:
        found = []
        for name in ("tcp", "unix_stream", "abstract_stream"):
            with suppress(BlockingIOError):
                getattr(self, name).accept()[0].close()
                found.append(name)
        for name in ("udp", "unix_dgram", "abstract_dgram"):
            with suppress(BlockingIOError):
                found.append(f"{name}: {getattr(self, name).recv(64)!r}")
        return found


@contextmanager
def _host_listeners() -> Iterator[HostListeners]:
    with ExitStack() as stack:
        folder = Path(tempfile.mkdtemp(prefix="lw-host-sockets-", dir="/tmp"))
        stack.callback(shutil.rmtree, folder, ignore_errors=True)
        folder.chmod(0o755)  # reachable by any user, as /run/dbus or /tmp/.X11-unix are

        def made(family: int, kind: int, address: str | tuple[str, int]) -> socket.socket:
            sock = stack.enter_context(socket.socket(family, kind))
            sock.bind(address)
            if kind == socket.SOCK_STREAM:
                sock.listen(8)
            sock.setblocking(False)
            if isinstance(address, str) and not address.startswith("\0"):
                os.chmod(address, 0o777)  # connectable by anyone, as the D-Bus system bus
            return sock

        abstract = f"lw-host-{uuid.uuid4().hex}"
        yield HostListeners(
            tcp=made(AF_INET, socket.SOCK_STREAM, ("127.0.0.1", 0)),
            udp=made(AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", 0)),
            folder=folder,
            unix_stream=made(AF_UNIX, socket.SOCK_STREAM, str(folder / "stream")),
            unix_dgram=made(AF_UNIX, socket.SOCK_DGRAM, str(folder / "dgram")),
            abstract=abstract,
            abstract_stream=made(AF_UNIX, socket.SOCK_STREAM, f"\0{abstract}-stream"),
            abstract_dgram=made(AF_UNIX, socket.SOCK_DGRAM, f"\0{abstract}-dgram"),
        )


def _attacks(h: HostListeners) -> list[tuple[str, str]]:
    """(name, python body): each tries to reach one listener; ``raw(family, type)``
    makes a socket through the raw call with a high bit in the family."""
    tcp, udp = h.tcp.getsockname(), h.udp.getsockname()
    stream, dgram = str(h.folder / "stream"), str(h.folder / "dgram")
    a_stream, a_dgram = f"\\0{h.abstract}-stream", f"\\0{h.abstract}-dgram"
    return [
        ("tcp", f"socket.create_connection({tcp!r}, 2).send(b'tcp')"),
        ("tcp-fastopen", f"S(2, 1).sendto(b'tfo', socket.MSG_FASTOPEN, {tcp!r})"),
        (
            "tcp-fastopen-connect",
            f"s = S(2, 1); s.setsockopt(6, 30, 1); s.connect({tcp!r}); s.send(b'tfoc')",
        ),
        ("tcp-high-family", f"raw(2, 1).connect({tcp!r})"),
        ("tcp-high-fastopen", f"raw(2, 1).sendto(b'tfo', socket.MSG_FASTOPEN, {tcp!r})"),
        ("mptcp", f"s = S(2, 1, 262); s.connect({tcp!r}); s.send(b'mptcp')"),
        ("udp", f"S(2, 2).sendto(b'udp', {udp!r})"),
        ("udp-connected", f"s = S(2, 2); s.connect({udp!r}); s.send(b'udpc')"),
        ("udp-sendmsg", f"S(2, 2).sendmsg([b'udpm'], [], 0, {udp!r})"),
        ("udp-high-family", f"raw(2, 2).sendto(b'udph', {udp!r})"),
        ("unix-stream", f"s = S(1, 1); s.connect({stream!r}); s.send(b'x')"),
        ("unix-high-family", f"raw(1, 1).connect({stream!r})"),
        ("unix-dgram", f"S(1, 2).sendto(b'x', {dgram!r})"),
        ("unix-dgram-pair", f"socket.socketpair(1, 2)[0].sendto(b'x', {dgram!r})"),
        ("unix-dgram-pair-msg", f"socket.socketpair(1, 2)[0].sendmsg([b'x'], [], 0, {dgram!r})"),
        ("unix-stream-pair", f"socket.socketpair(1, 1)[0].connect({stream!r})"),
        ("unix-seqpacket-pair", f"socket.socketpair(1, 5)[0].connect({stream!r})"),
        ("abstract-stream", f"s = S(1, 1); s.connect('{a_stream}'); s.send(b'x')"),
        ("abstract-high-family", f"raw(1, 1).connect('{a_stream}')"),
        ("abstract-dgram", f"S(1, 2).sendto(b'x', '{a_dgram}')"),
        ("abstract-dgram-pair", f"socket.socketpair(1, 2)[0].sendto(b'x', '{a_dgram}')"),
    ]


_ATTACK_PRELUDE = """import ctypes, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
S = socket.socket
def raw(family, kind):
    L = ctypes.c_long
    fd = libc.syscall(L({nr}), L(family | 1 << 32), L(kind), L(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), 'raw socket')
    return S(fileno=fd)
"""


def _attack_all(attacks: list[tuple[str, str]]) -> str:
    """One process making every attempt in turn, printing ``name=sent`` or the errno."""
    code = _ATTACK_PRELUDE.format(nr=syscall_number("socket")) + "".join(
        f"try:\n    {body}\n    print('{name}=sent')\n"
        f"except OSError as e:\n    print('{name}=' + str(e.errno))\n"
        for name, body in attacks
    )
    return f"python3 -c {shell_quote(code)}"


def _squat(name: str) -> str:
    """Bind a socketpair's end to ``name`` in the abstract namespace and hold it until
    the host has tried the name (or 10 s)."""
    code = (
        "import os, socket, time\n"
        "a, b = socket.socketpair()\n"
        f"try:\n    a.bind('\\0{name}'); print('squat=bound')\n"
        "except OSError as e:\n    print('squat=' + str(e.errno))\n"
        "open('squatting', 'w').close()\n"
        "end = time.time() + 10\n"
        "while not os.path.exists('tried') and time.time() < end:\n    time.sleep(0.02)\n"
    )
    return f"python3 -c {shell_quote(code)}"


def _host_takes(name: str, marker: Path, done: Path, task: asyncio.Task[object]) -> bool:
    """Once the command holds ``name`` (or gave up), whether the host can bind it."""
    while not marker.exists() and not task.done():
        threading.Event().wait(0.02)
    try:
        with socket.socket(AF_UNIX, socket.SOCK_STREAM) as mine:
            mine.bind(f"\0{name}")
        return True
    except OSError:
        return False
    finally:
        done.touch()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_no_socket_reaches_the_host(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    with _host_listeners() as host:
        attacks = _attacks(host)
        async with running(dev_env, data_dir, backend) as (bash, plugin):
            scratch = plugin.config.scope_of(WORKER, "lw.Worker").own_scratch
            commands = [_attack_all(attacks), _squat(host.squat)]
            task = asyncio.create_task(bash.run(WORKER, commands))
            free = await asyncio.to_thread(
                _host_takes, host.squat, scratch / "squatting", scratch / "tried", task
            )
            results = await task
        arrived = host.arrived()
    outputs = dict(line.split("=", 1) for r in results for line in r.stdout.split())
    assert set(outputs) == {name for name, _ in attacks} | {"squat"}, results
    assert arrived == [], (arrived, outputs)
    assert free, "the command holds an abstract name on the host"
    if backend == "landlock":  # refused at the filter, before any address is looked at
        refused = {n: c for n, c in outputs.items() if not n.startswith("unix-stream-pair")}
        refused.pop("unix-seqpacket-pair")
        assert set(refused.values()) == {str(EPERM)}, refused


@pytest.mark.parametrize("backend", BACKENDS)
async def test_no_allocation_escapes_the_file_size_limit(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    resvsp = (
        "import fcntl, os, struct\n"
        "fd = os.open('resv', os.O_RDWR | os.O_CREAT, 0o600)\n"
        "try:\n"
        "    fcntl.ioctl(fd, 0x4030582A, struct.pack('hh4xqqiI16x', 0, 0, 0, 1 << 30, 0, 0))\n"
        "    print('resvsp=0')\n"
        "except OSError as e:\n"
        "    print('resvsp=' + str(e.errno))\n"
    )
    posix = "import os; os.posix_fallocate(os.open('posix', os.O_RDWR | os.O_CREAT), 0, 1 << 20)"
    commands = [
        ": > keep; fallocate -n -l 3G keep; echo keep=$?",
        ": > zero; fallocate -z -n -l 1G zero; echo zero=$?",
        "fallocate -l 3G grow; echo grow=$?",
        ': > "$TMPDIR/keep"; fallocate -n -l 1G "$TMPDIR/keep"; echo tmp-keep=$?',
        f"python3 -c {shell_quote(resvsp)}",
        "fallocate -l 1M ok; echo ok=$?",
        "fallocate -p -o 0 -l 64K ok; echo punch=$?",
        "fallocate -c -o 0 -l 4096 ok; echo collapse=$?",
        f"python3 -c {shell_quote(posix)}; echo posix=$?",
    ]
    async with running(dev_env, data_dir, backend) as (bash, plugin):
        scratch = plugin.config.scope_of(WORKER, "lw.Worker").own_scratch
        results = await bash.run(WORKER, commands)
    seen = dict(r.stdout.strip().rsplit("=", 1) for r in results)
    for name in ("keep", "zero", "tmp-keep", "collapse"):
        assert seen[name] == "1", (name, results)
    assert "unsupported" in results[0].stderr, results[0].stderr  # EOPNOTSUPP
    assert seen["grow"] != "0"  # RLIMIT_FSIZE: SIGXFSZ or EFBIG
    assert seen["resvsp"] == str(EOPNOTSUPP)
    assert (seen["ok"], seen["punch"], seen["posix"]) == ("0", "0", "0"), results
    blocks = {p.name: p.stat().st_blocks * 512 for p in scratch.iterdir() if p.is_file()}
    for name in ("keep", "zero", "grow", "resv"):
        assert blocks.get(name, 0) == 0, (name, blocks)
    assert blocks["ok"] >= (1 << 20) - (64 << 10) and blocks["posix"] >= 1 << 20, blocks
    assert sum(blocks.values()) < 4 << 20, blocks


_X32 = """import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
L = ctypes.c_long
print('reached', libc.syscall(L(0x40000000 | {nr}), L(40), L(1), L(0)))
"""
#: push rbx; mov eax, 359 (i386 socket); mov ebx, 40 (AF_VSOCK); mov ecx, 1; xor edx,
#: edx; int 0x80; pop rbx; ret
_I386 = """import ctypes, mmap
m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(bytes.fromhex('53b867010000bb28000000b90100000031d2cd805bc3'))
entry = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))
print('reached', entry())
"""


@pytest.mark.skipif(platform.machine() != "x86_64", reason="x32 and int 0x80 are x86_64's")
@pytest.mark.parametrize("backend", BACKENDS)
async def test_other_entry_points_end_the_command(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    x32 = _X32.format(nr=syscall_number("socket"))
    async with running(dev_env, data_dir, backend) as (bash, _):
        results = await bash.run(
            WORKER,
            [
                f"python3 -c {shell_quote(x32)}; echo x32=$?",
                f"python3 -c {shell_quote(_I386)}; echo i386=$?",
                "echo alive",
            ],
        )
    x32_result, i386_result, alive = results
    for result, name in ((x32_result, "x32"), (i386_result, "i386")):
        assert "reached" not in result.stdout, result.stdout
        assert result.stdout.strip() == f"{name}=159", result  # 128 + SIGSYS
    assert alive.stdout == "alive\n"


_ORDINARY = """import asyncio, multiprocessing, os, socket
a, b = multiprocessing.Pipe()
child = multiprocessing.Process(target=lambda: b.send(os.getpid()))
child.start(); child.join()
print('pipe', a.recv() == child.pid)
print('loop', asyncio.run(asyncio.sleep(0, 'ok')))
x, y = socket.socketpair(); x.send(b'pair'); print(y.recv(4).decode())
"""
_LOCAL_SERVER = """import socket, threading
s = socket.create_server(('127.0.0.1', 0))
threading.Thread(target=lambda: s.accept()[0].send(b'local'), daemon=True).start()
print(socket.create_connection(s.getsockname()).recv(5).decode())
u = socket.socket(socket.AF_UNIX); u.bind('/tmp/u'); u.listen()
threading.Thread(target=lambda: u.accept()[0].send(b'unix'), daemon=True).start()
c = socket.socket(socket.AF_UNIX); c.connect('/tmp/u'); print(c.recv(4).decode())
"""


@pytest.mark.parametrize("backend", BACKENDS)
async def test_ordinary_programs_keep_working(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    commands = [f"python3 -c {shell_quote(_ORDINARY)}"]
    if backend == "bwrap":  # its own loopback and mount view; Landlock refuses both
        commands.append(f"python3 -c {shell_quote(_LOCAL_SERVER)}")
    async with running(dev_env, data_dir, backend) as (bash, _):
        results = await bash.run(WORKER, commands)
    assert results[0].stdout == "pipe True\nloop ok\npair\n", results[0]
    if backend == "bwrap":
        assert results[1].stdout == "local\nunix\n", results[1]
