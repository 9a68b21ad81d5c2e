"""A second escape corpus: attacks the earlier escape files do not make (kernel
objects that are not files, signals by other routes, the launcher's descriptors,
device nodes, host setuid binaries, cgroup, ``/proc/sys`` and ``/sys`` writes,
``prctl``, processes that try to outlive their command, floods of output, hostile
names past the quota, overlay attributes, a symlink swapped in while memory is
committed, IPC and sockets between two agents running at once, links and ``O_PATH``
descriptors out of the view, core dumps). Each attack is ``(name, agent, command,
check)``; ``tests/test_escape_fresh_corpus.py`` runs them through the real ``lw.bash``
on both backends and checks the host."""

from __future__ import annotations

# ruff: noqa: E501  (the corpus reads best one attempt per line)
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lw_temporal import BashResult
from tests._escape_support import shell_quote

PLANNER = "pipeline_fr/sub-runs/run_cr@1"
WORKER = f"{PLANNER}/steps/step_1"
OTHER = "pipeline_fo/sub-runs/run_cr@1/steps/step_1"
SECRET = "lw-fresh-secret-" + os.urandom(6).hex()
SECRET_NAME = "lw-fresh-name-" + os.urandom(6).hex()


@dataclass
class World:
    backend: str
    data: Path
    canary: Path
    own: Path
    planner: Path
    other: Path
    workflow_store: Path
    worker_pid: int
    sleeper_pid: int
    uids: dict[str, int] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)


Check = Callable[[World, BashResult], None]


@dataclass
class Attack:
    name: str
    agent: str
    build: Callable[[World], str]
    check: Check | None = None
    #: Another agent's command running meanwhile: it writes ``ready`` in its scratch
    #: when set up and waits for ``stop``; the attack starts once it is ready.
    victim: tuple[str, Callable[[World], str]] | None = None
    #: Done on the host once the attack's own command wrote ``ready`` in its scratch;
    #: then ``stop`` is made there.
    host_action: Callable[[World], None] | None = None
    timeout: float = 30.0
    backends: tuple[str, ...] = ("bwrap", "landlock")


def hexpath(path: Path | str) -> str:
    """A host path as a python expression the pre-check and the path view never read."""
    return f"bytes.fromhex({str(path).encode().hex()!r}).decode()"


def py(body: str) -> str:
    return f"python3 -c {shell_quote(body)}"


PRELUDE = """import ctypes, os, errno, signal, struct, time, socket, fcntl
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
L = ctypes.c_long
def sc(*a):
    r = libc.syscall(*(L(x) for x in a))
    return r if r >= 0 else -ctypes.get_errno()
def tell(name, r):
    print(name, 'REACHED' if (r is True or (isinstance(r, int) and r >= 0 and r is not False)) else 'refused', r, flush=True)
def attempt(name, fn):
    try:
        r = fn()
        tell(name, True if r is None else r)
    except OSError as e:
        tell(name, -e.errno)
def ready():
    open('/proc/self/cwd/ready', 'w').close()
SECRET = SECRET_TEXT
def wait_stop(seconds=20):
    end = time.time() + seconds
    while not os.path.exists('stop') and time.time() < end:
        time.sleep(0.02)
"""


def probe(body: str) -> str:
    return py(PRELUDE.replace("SECRET_TEXT", hexpath(SECRET)) + body)


def _no(*words: str) -> Check:
    def check(world: World, result: BashResult) -> None:
        text = result.stdout + result.stderr
        for word in words:
            assert word not in text, (word, text[-3000:])

    return check


NOTHING_REACHED = _no("REACHED", SECRET, SECRET_NAME)


def _watch(kind: str) -> Callable[[World], str]:
    """Watch the canary folder (a host folder outside the view, world-readable) with
    inotify or fanotify and print every event's bytes: the host makes a file of a
    secret name there once the watch is up."""

    def build(world: World) -> str:
        target = hexpath(world.canary)
        if kind == "inotify":
            setup = (
                "fd = libc.inotify_init1(0o4000)\n"
                f"w = libc.inotify_add_watch(fd, {target}.encode(), 0x100 | 0x20 | 0x200)\n"
            )
        else:  # FAN_REPORT_DFID_NAME, O_RDONLY; mark FAN_CREATE | FAN_ONDIR | on child
            setup = (
                "fd = sc(300, 0x00000c00 | 0o4000, 0)\n"
                "w = fd if fd < 0 else sc(301, fd, 1, 0x100 | 0x40000000 | 0x08000000, -100,"
                f" ctypes.addressof(ctypes.create_string_buffer({target}.encode())))\n"
            )
        body = setup + (
            "print('watch', 'REACHED' if w >= 0 else 'refused', w if w >= 0 else ctypes.get_errno(), flush=True)\n"
            "ready()\n"
            "data = b''\n"
            "end = time.time() + (6 if w >= 0 else 0)\n"
            "while w >= 0 and time.time() < end and SECRET_BYTES not in data:\n"
            "    try:\n        data += os.read(fd, 65536)\n"
            "    except BlockingIOError:\n        time.sleep(0.05)\n"
            "print('events', data.hex())\n"
            "print('decoded', data.replace(b'\\0', b' ').decode(errors='replace'))\n"
        )
        return probe(f"SECRET_BYTES = {hexpath(SECRET_NAME)}.encode()\n" + body)

    return build


def _make_secret_name(world: World) -> None:
    (world.canary / SECRET_NAME).write_text("x")


def _watch_check(world: World, result: BashResult) -> None:
    world.notes[f"watch-{world.backend}"] = result.stdout.splitlines()[:1]
    assert SECRET_NAME not in result.stdout, "a watch outside the view saw a host file's name"
    assert SECRET_NAME.encode().hex() not in result.stdout, "a watch saw a host file's name"


def _launcher_fds(world: World) -> str:
    return probe(
        "for pid in sorted({os.getppid(), 1}):\n"
        "    try:\n        fds = os.listdir(f'/proc/{pid}/fd')\n"
        "    except OSError as e:\n        print('list', pid, 'refused', e.errno); continue\n"
        "    own = {os.readlink(f'/proc/self/fd/{n}') for n in (0, 1, 2)}\n"
        "    for fd in fds:\n"
        "        try:\n            target = os.readlink(f'/proc/{pid}/fd/{fd}')\n"
        "        except OSError:\n            target = None\n"
        "        if target in own:\n            print('own stream', pid, fd); continue\n"
        "        attempt(f'write-{pid}-{fd}', lambda: os.close(os.open(f'/proc/{pid}/fd/{fd}', os.O_WRONLY | os.O_NONBLOCK)))\n"
        "        attempt(f'read-{pid}-{fd}', lambda: os.close(os.open(f'/proc/{pid}/fd/{fd}', os.O_RDONLY | os.O_NONBLOCK)))\n"
    )


def _signals(world: World) -> str:
    """Every signal route but ``kill`` to a root host process and to a host process
    of the agent's own uid (only the sandbox stops the latter)."""
    targets = [world.sleeper_pid, int(world.notes.get("own_sleeper", 0))]
    return probe(
        f"for t in {targets!r}:\n"
        "    if not t:\n        continue\n"
        "    r, w = os.pipe()\n"
        "    try:\n"
        "        fcntl.fcntl(r, fcntl.F_SETOWN, t); fcntl.fcntl(r, 10, 9)\n"
        "        fcntl.fcntl(r, fcntl.F_SETFL, fcntl.fcntl(r, fcntl.F_GETFL) | os.O_ASYNC)\n"
        "        fcntl.fcntl(w, fcntl.F_SETOWN, t); fcntl.fcntl(w, 10, 9)\n"
        "        fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_ASYNC)\n"
        "        os.write(w, b'x'); os.read(r, 1); print('sigio sent', t)\n"
        "    except OSError as e:\n        print('sigio', t, 'refused', e.errno)\n"
        "    try:\n"
        "        fcntl.fcntl(r, fcntl.F_SETOWN, -os.getpgid(t)); os.write(w, b'x')\n"
        "    except OSError as e:\n        print('sigio-pgrp', t, 'refused', e.errno)\n"
        "    info = ctypes.create_string_buffer(struct.pack('iii', 9, 0, -1) + bytes(116))\n"
        "    tell(f'tgkill-{t}', sc(234, t, t, 9))\n"
        "    tell(f'tkill-{t}', sc(200, t, 9))\n"
        "    tell(f'rt_sigqueueinfo-{t}', sc(129, t, 9, ctypes.addressof(info)))\n"
        "    tell(f'rt_tgsigqueueinfo-{t}', sc(297, t, t, 9, ctypes.addressof(info)))\n"
        "    pfd = sc(434, t, 0)\n"
        "    if pfd >= 0:\n"
        "        tell(f'pidfd_send_signal-{t}', sc(424, pfd, 9, 0, 0))\n"
        "        iov = (ctypes.c_ulong * 2)(0x400000, 4096)\n"
        "        tell(f'process_madvise-{t}', sc(440, pfd, ctypes.addressof(iov), 1, 21, 0))\n"
        "        tell(f'process_mrelease-{t}', sc(448, pfd, 0))\n"
        "    tell(f'prlimit-{t}', sc(302, t, 7, 0, ctypes.addressof(ctypes.create_string_buffer(16))))\n"
        "    for what in ('environ', 'mem', 'fd/0', 'cwd/', 'root/etc/shadow', 'stack', 'syscall'):\n"
        "        try:\n"
        "            with open(f'/proc/{t}/{what}', 'rb') as f:\n                print('LEAK', what, f.read(256))\n"
        "        except OSError:\n            pass\n"
        "time.sleep(0.5)\n"
    )


def _signals_check(world: World, result: BashResult) -> None:
    NOTHING_REACHED(world, result)
    assert "LEAK" not in result.stdout, result.stdout
    for pid in (world.sleeper_pid, int(world.notes.get("own_sleeper", 0))):
        if pid:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            assert state in ("S", "R"), (pid, state)


#: Device nodes of this host a command must never open, by their host path.
HOST_DEVICES = (
    "/dev/fuse", "/dev/kvm", "/dev/kmsg", "/dev/net/tun", "/dev/loop-control", "/dev/loop0",
    "/dev/vda", "/dev/console", "/dev/tty0", "/dev/tty1", "/dev/hwrng", "/dev/cpu_dma_latency",
    "/dev/btrfs-control", "/dev/userfaultfd", "/dev/vhost-net", "/dev/vsock", "/dev/uinput",
    "/dev/mem", "/dev/port", "/dev/snapshot", "/dev/cpu/0/msr", "/dev/mapper/control",
)  # fmt: skip


def _devices(world: World) -> str:
    paths = [p for p in HOST_DEVICES if os.path.exists(p)]
    return probe(
        f"for p in {paths!r}:\n"
        "    attempt('open ' + p, lambda: os.close(os.open(p, os.O_RDWR | os.O_NONBLOCK)))\n"
        "    attempt('read ' + p, lambda: os.close(os.open(p, os.O_RDONLY | os.O_NONBLOCK)))\n"
        "print('checked', len(" + repr(paths) + "))\n"
    )


SETUID_RUN = (
    "grep -E '^(NoNewPrivs|CapEff|CapPrm|CapAmb)' /proc/self/status; "
    "echo 'grep -E \"^(Uid|Gid|CapEff)\" /proc/self/status; cat /etc/shadow' | newgrp 2>&1; "
    "echo chkpwd=$(echo x | /usr/sbin/unix_chkpwd root nullok >/dev/null 2>&1; echo $?); "
    "chfn -f pwned 2>&1 </dev/null; gpasswd -a agent root 2>&1; chage -l root 2>&1; "
    "expiry -c 2>&1; echo end"
)


def _setuid_check(world: World, result: BashResult) -> None:
    assert "NoNewPrivs:\t1" in result.stdout, result.stdout
    for line in result.stdout.splitlines():
        if line.startswith(("Uid:", "Gid:")):
            assert "0" not in line.split()[1:], line
        if line.startswith("Cap"):
            assert line.split()[1] == "0000000000000000", line
    assert "root:$" not in result.stdout and "root:!" not in result.stdout
    assert "Last password change" not in result.stdout, result.stdout  # chage read shadow
    assert result.stdout.rstrip().endswith("end")


def _cgroup(world: World) -> str:
    return probe(
        "before = open('/proc/self/cgroup').read()\n"
        "print(before)\n"
        "for line in before.splitlines():\n"
        "    _, ctrl, path = line.split(':', 2)\n"
        "    for c in (ctrl.replace('name=', ''), 'unified', ''):\n"
        "        base = '/sys/fs/cgroup/' + c if c else '/sys/fs/cgroup'\n"
        "        for folder in (base, base + path, os.path.dirname(base + path)):\n"
        "            for name, value in (('cgroup.procs', str(os.getpid())), ('tasks', str(os.getpid())),\n"
        "                    ('memory.limit_in_bytes', '-1'), ('memory.memsw.limit_in_bytes', '-1'),\n"
        "                    ('memory.max', 'max'), ('pids.max', 'max'), ('cgroup.kill', '1'),\n"
        "                    ('notify_on_release', '1'), ('release_agent', '/bin/true')):\n"
        "                def put():\n"
        "                    with open(folder + '/' + name, 'w') as f:\n"
        "                        f.write(value)\n"
        "                attempt(f'{folder}/{name}', put)\n"
        "after = open('/proc/self/cgroup').read()\n"
        "print('moved' if after != before else 'stayed')\n"
    )


#: Host kernel settings a command writes at; the host reads them before and after.
PROC_SYS = (
    "/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches", "/proc/sysrq-trigger",
    "/proc/sys/fs/protected_hardlinks", "/proc/sys/kernel/hostname", "/proc/sys/kernel/domainname",
    "/proc/sys/net/ipv4/ip_forward", "/proc/sys/kernel/modprobe", "/proc/sys/user/max_user_namespaces",
    "/proc/sys/kernel/dmesg_restrict", "/proc/sys/vm/overcommit_memory", "/proc/sys/fs/inotify/max_user_watches",
    "/sys/kernel/mm/transparent_hugepage/enabled", "/sys/power/state", "/sys/kernel/uevent_helper",
    "/sys/module/printk/parameters/time",
)  # fmt: skip


def _proc_sys(world: World) -> str:
    return probe(
        f"for p in {list(PROC_SYS)!r}:\n"
        "    def put():\n"
        "        with open(p, 'w') as f:\n"
        "            f.write('|/bin/sh -c id' if 'pattern' in p or 'helper' in p or 'modprobe' in p else '0')\n"
        "    attempt(p, put)\n"
    )


def _oom(world: World) -> str:
    return probe(
        "for v in ('-1000', '-17', '0'):\n"
        "    def put():\n"
        "        with open('/proc/self/oom_score_adj', 'w') as f:\n            f.write(v)\n"
        "    attempt('self-' + v, put)\n"
        f"for pid in (1, os.getppid(), {world.worker_pid}):\n"
        "    def put():\n"
        "        with open(f'/proc/{pid}/oom_score_adj', 'w') as f:\n            f.write('1000')\n"
        "    attempt(f'other-{pid}', put)\n"
        "print('now', open('/proc/self/oom_score_adj').read().strip())\n"
    )


def _oom_check(world: World, result: BashResult) -> None:
    assert "self--1000 refused" in result.stdout, result.stdout
    assert "other-" + str(world.worker_pid) + " refused" in result.stdout, result.stdout
    assert "now 1000" in result.stdout, result.stdout  # /proc is read-only on both
    assert "self-0 REACHED" not in result.stdout, result.stdout
    assert Path("/proc/self/oom_score_adj").read_text() == world.notes["worker_oom"]


def _proc_attr(world: World) -> str:
    return probe(
        "for p, v in (('/proc/self/attr/current', 'unconfined'), ('/proc/self/attr/exec', 'unconfined'),\n"
        "             ('/proc/self/loginuid', '0'), ('/proc/self/uid_map', '0 0 1'),\n"
        "             ('/proc/self/gid_map', '0 0 1'), ('/proc/self/setgroups', 'allow'),\n"
        "             ('/proc/self/attr/apparmor/current', 'changeprofile unconfined'),\n"
        "             ('/proc/self/coredump_filter', '0xff'), ('/proc/1/timerslack_ns', '1')):\n"
        "    def put():\n"
        "        with open(p, 'w') as f:\n            f.write(v)\n"
        "    attempt(p, put)\n"
    )


def _proc_attr_check(world: World, result: BashResult) -> None:
    text = result.stdout.replace("/proc/self/coredump_filter REACHED", "")  # its own dumps
    assert "REACHED" not in text, result.stdout


def _prctl(world: World) -> str:
    return probe(
        "for cap in (0, 7, 21, 12, 38):\n"
        "    tell(f'ambient-{cap}', sc(157, 47, 2, cap, 0, 0))\n"
        "tell('securebits', sc(157, 28, 0, 0, 0, 0))\n"
        "tell('set_mm', sc(157, 35, 1, 0x400000, 0, 0))\n"
        "tell('nnp-off', sc(157, 38, 0, 0, 0, 0))\n"
        "hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)\n"
        "data = (ctypes.c_uint32 * 6)(*([0xFFFFFFFF] * 6))\n"
        "tell('capset', sc(126, ctypes.addressof(hdr), ctypes.addressof(data)))\n"
        "tell('setuid0', sc(105, 0)); tell('setgid0', sc(106, 0)); tell('setresuid0', sc(117, 0, 0, 0))\n"
        "tell('setgroups0', sc(116, 1, ctypes.addressof((ctypes.c_uint32 * 1)(0))))\n"
        "print(*[l for l in open('/proc/self/status') if l.startswith(('Cap', 'Uid', 'NoNew'))], sep='')\n"
    )


def _prctl_check(world: World, result: BashResult) -> None:
    assert "REACHED" not in result.stdout, result.stdout
    for line in result.stdout.splitlines():
        if line.startswith("Cap"):
            assert line.split()[1] == "0000000000000000", line
        if line.startswith("Uid:"):
            assert "0" not in line.split()[1:], line


#: Leaves the command's process tree every way a process can (double fork, a new
#: session, its own subreaper, signals ignored, a new pid every few milliseconds) and
#: keeps writing the time into ``beat`` in the scratch.
_SURVIVOR = """import os, signal, time
for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGPIPE):
    signal.signal(s, signal.SIG_IGN)
if os.fork():
    os._exit(0)
os.setsid()
import ctypes
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
if os.fork():
    os._exit(0)
beat = os.path.join(os.environ.get('HOME', '.'), 'beat')
end = time.time() + 60
while time.time() < end:
    if os.fork():
        os._exit(0)  # the child goes on under a new pid
    with open(beat, 'w') as f:
        f.write(str(time.time()))
    time.sleep(0.01)
"""


def survivor(wait: str) -> Callable[[World], str]:
    return lambda world: f"python3 -c {shell_quote(_SURVIVOR)} </dev/null >/dev/null 2>&1 & {wait}"


def processes_of(uid: int) -> list[int]:
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/status") as status:
                line = next(ln for ln in status if ln.startswith("Uid:"))
        except (OSError, StopIteration):
            continue
        if str(uid) in line.split()[1:]:
            found.append(int(pid))
    return found


def nothing_left(agent: str, beat: bool = True) -> Check:
    def check(world: World, result: BashResult) -> None:
        import time

        uid = world.uids.get(agent)
        mine = {int(world.notes.get("own_sleeper", 0))}  # the host's own, not the agent's

        def left_now() -> list[int]:
            return [p for p in processes_of(uid) if p not in mine] if uid is not None else []

        deadline = time.monotonic() + 10
        left = left_now()
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = left_now()
        if os.geteuid() == 0:
            assert uid is not None
            assert left == [], f"processes of the agent outlived its command: {left}"
        stamp = world.own / "beat" if agent == WORKER else world.planner / "beat"
        if beat and stamp.exists():
            first = stamp.stat().st_mtime
            time.sleep(1)
            assert stamp.stat().st_mtime == first, "something still writes in the scratch"

    return check


def _quick(world: World, result: BashResult) -> None:
    nothing_left(WORKER)(world, result)
    assert result.duration_seconds < 15, result.duration_seconds
    assert result.stdout == "done\n", result


FLOOD = (
    "yes \"$(head -c 1000 /dev/zero | tr '\\0' A)\" | head -c 300M; "
    "yes \"$(head -c 1000 /dev/zero | tr '\\0' B)\" | head -c 150M >&2; echo end"
)


def _flood_check(world: World, result: BashResult) -> None:
    assert result.stdout_truncated and result.stderr_truncated, result
    assert len(result.stdout) < 80_000 and len(result.stderr) < 80_000
    assert result.stdout_bytes >= 300 << 20, result.stdout_bytes
    rss = _rss_kib()
    assert rss - int(world.notes["rss_before"]) < 200_000, ("the worker grew", rss)  # KiB
    for ref in (result.stdout_ref, result.stderr_ref):
        if ref:
            saved = world.own / Path(ref).relative_to("/mnt/scratch/own")
            assert saved.stat().st_size <= (64 << 20) + 4096, saved.stat().st_size


def _rss_kib() -> int:
    with open("/proc/self/status") as status:
        return int(next(ln for ln in status if ln.startswith("VmRSS:")).split()[1])


def _plain_result(world: World, result: BashResult) -> None:
    assert result.rejection is None, result.rejection
    # 64 KiB a stream at most, a byte that is not UTF-8 shown as its four-character \\xNN
    assert isinstance(result.stdout, str) and len(result.stdout) <= 4 * 65536 + 1000
    assert len(result.stderr) <= 4 * 65536 + 1000


#: Names no tool expects, then more entries than the quota allows (3,000) under them.
HOSTILE_SCRATCH = (
    "mkdir -p h && cd h && "
    "touch \"$(printf 'new\\nline')\" \"$(printf 'bad\\377utf8')\" \"$(printf 'esc\\033]0;pwned\\007')\" "
    "\"$(printf 'cr\\rx')\" -- -rf '*' \"$(head -c 255 /dev/zero | tr '\\0' n)\" "
    '"$(python3 -c \'print("\\u20ac" * 85, end="")\')" && '
    "mkdir \"$(printf 'dir\\nx\\377')\" && cd \"$(printf 'dir\\nx\\377')\" && "
    'python3 -c \'import os\nfor i in range(4000): open(b"f\\n\\xff%05d" % i, "w").close()\'; echo end'
)


def _quota_check(world: World, result: BashResult) -> None:
    assert result.stopped is not None and "removed" in result.stopped, result
    entries = sum(len(d) + len(f) for _, d, f in os.walk(world.own))
    assert entries <= 3000, entries


#: Names a store may well take or refuse, but that must not crash the commit.
ODD_MEMORY_NAMES = (
    'cd /mnt/memory/workflow && echo a > "$(python3 -c \'print("\\u20ac" * 85, end="")\')" && '
    "echo b > 'trailing ' && echo c > '...' && echo d > 'back\\slash' && echo e > -dash && "
    "echo f > \"$(printf 'sep\\342\\200\\250x')\" && echo g > \"$(printf '\\357\\273\\277bom')\" && "
    "echo h > \"$(printf 'e\\314\\201')\" && echo i > \"$(head -c 255 /dev/zero | tr '\\0' z)\" && "
    'mkdir -p "$(python3 -c \'print("/".join(["d" * 250] * 3), end="")\')" && echo end'
)


def _odd_names_check(world: World, result: BashResult) -> None:
    assert result.rejection is None or world.backend == "landlock", result
    for path in world.workflow_store.rglob("*"):
        assert path.is_file() or path.is_dir(), path
        assert not path.is_symlink(), path


OVERLAY_XATTRS = probe(
    "os.chdir('/mnt/memory/workflow') if os.path.isdir('/mnt/memory/workflow') else None\n"
    "os.makedirs('ov/inner', exist_ok=True)\n"
    "open('ov/inner/f.md', 'w').write('x')\n"
    "for target in ('ov', 'ov/inner', '.'):\n"
    "    for name, value in (('trusted.overlay.opaque', b'y'), ('trusted.overlay.redirect', b'/../../../..'),\n"
    "                        ('user.overlay.opaque', b'y'), ('user.overlay.redirect', b'/../..'),\n"
    "                        ('trusted.overlay.metacopy', b''), ('user.overlay.metacopy', b''),\n"
    "                        ('trusted.overlay.origin', b'\\0' * 20), ('user.overlay.whiteout', b'')):\n"
    "        attempt(f'{target}:{name}', lambda: os.setxattr(target, name, value))\n"
    "open('w.md', 'w').write('w')\n"
    "tell('rename-whiteout', sc(316, -100, ctypes.addressof(ctypes.create_string_buffer(b'w.md')), -100, ctypes.addressof(ctypes.create_string_buffer(b'w2.md')), 4))\n"
    "tell('mknod-whiteout', sc(259, -100, ctypes.addressof(ctypes.create_string_buffer(b'wh')), 0o20000, 0))\n"
    "open('after.md', 'w').write('after')\n"
)


def _overlay_check(world: World, result: BashResult) -> None:
    import stat

    for path in [world.workflow_store, *world.workflow_store.rglob("*")]:
        st = os.lstat(path)
        assert stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode), path
        names = os.listxattr(path, follow_symlinks=False)
        assert not [n for n in names if "overlay" in n], (path, names)


def _swap(world: World) -> str:
    """A process left behind swaps a staged memory file for a symlink to a host
    secret, and a staged folder for one to the host folder, as fast as it can, while
    the worker captures and commits what the command left."""
    secret, folder = hexpath(world.canary / "secret.txt"), hexpath(world.canary)
    body = (
        "import os, time\n"
        "os.chdir('/mnt/memory/workflow')\n"
        "open('swap.md', 'w').write('benign\\n'); os.makedirs('dd', exist_ok=True); open('dd/in.md', 'w').write('in\\n')\n"
        "if os.fork():\n    os._exit(0)\n"
        "os.setsid()\n"
        "end = time.time() + 20\n"
        "while time.time() < end:\n"
        "    try:\n"
        f"        os.symlink({secret}, 'l.tmp'); os.rename('l.tmp', 'swap.md')\n"
        "        open('f.tmp', 'w').write('benign\\n'); os.rename('f.tmp', 'swap.md')\n"
        f"        os.symlink({folder}, 'd.tmp'); os.rename('dd', 'dd.old'); os.rename('d.tmp', 'dd')\n"
        "        os.unlink('dd'); os.rename('dd.old', 'dd')\n"
        "    except OSError:\n        pass\n"
    )
    return f"python3 -c {shell_quote(body)} </dev/null >/dev/null 2>&1; sleep 0.3; echo left"


def _swap_check(world: World, result: BashResult) -> None:
    for path in world.workflow_store.rglob("*"):
        assert not path.is_symlink(), path
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path
    assert not (world.workflow_store / "dd" / "secret.txt").exists()


def _mq_victim(world: World) -> str:
    return probe(
        "libc.mq_open.restype = ctypes.c_int\n"
        "q = libc.mq_open(b'/lw-fresh', 0o100 | 2, 0o666, None)\n"
        "print('mq', q, ctypes.get_errno())\n"
        "q >= 0 and libc.mq_send(q, SECRET.encode(), len(SECRET), 0)\n"
        "k = libc.shmget(0x4C570F00, 4096, 0o1666); libc.shmat.restype = ctypes.c_void_p\n"
        "a = libc.shmat(k, None, 0) if k >= 0 else None\n"
        "a not in (None, ctypes.c_void_p(-1).value) and ctypes.memmove(a, SECRET.encode(), len(SECRET))\n"
        "libc.semget(0x4C570F01, 1, 0o1666); libc.msgget(0x4C570F02, 0o1666)\n"
        "ready(); wait_stop()\n",
    ).replace("PRELUDE_SECRET", "")


def _mq_attack(world: World) -> str:
    return probe(
        "libc.mq_open.restype = ctypes.c_int\n"
        "q = libc.mq_open(b'/lw-fresh', 2, 0, None)\n"
        "tell('mq_open', q if q >= 0 else -ctypes.get_errno())\n"
        "buf = ctypes.create_string_buffer(8192)\n"
        "q >= 0 and print('got', libc.mq_receive(q, buf, 8192, None), buf.value)\n"
        "print('mqueue', sorted(os.listdir('/dev/mqueue')) if os.path.isdir('/dev/mqueue') else None)\n"
        "libc.shmat.restype = ctypes.c_void_p\n"
        "k = libc.shmget(0x4C570F00, 0, 0)\n"
        "tell('shmget', k if k >= 0 else -ctypes.get_errno())\n"
        "a = libc.shmat(k, None, 0) if k >= 0 else None\n"
        "a not in (None, ctypes.c_void_p(-1).value) and print('shm', ctypes.string_at(a, 64))\n"
        "tell('semget', sc(64, 0x4C570F01, 0, 0)); tell('msgget', sc(68, 0x4C570F02, 0))\n"
        "print(open('/proc/sysvipc/shm').read()[-2000:])\n"
    )


def _abstract_victim(world: World) -> str:
    return probe(
        "s = None\n"
        "try:\n    s = socket.socket(socket.AF_UNIX); s.bind('\\0lw-fresh-pair'); s.listen(4); s.setblocking(False); print('bound')\n"
        "except OSError as e:\n    print('bind', e.errno)\n"
        "    s = socket.socketpair()[0]; s.setblocking(False)\n"
        "ready()\n"
        "end = time.time() + 20\n"
        "while not os.path.exists('stop') and time.time() < end:\n"
        "    try:\n        c, _ = s.accept(); c.send(SECRET.encode()); c.close()\n"
        "    except OSError:\n        time.sleep(0.02)\n"
    )


def _abstract_attack(world: World) -> str:
    return probe(
        "def go():\n"
        "    c = socket.socket(socket.AF_UNIX); c.settimeout(2); c.connect('\\0lw-fresh-pair'); print(c.recv(100))\n"
        "attempt('connect-abstract', go)\n"
        "def pair():\n"
        "    a, b = socket.socketpair(); a.connect('\\0lw-fresh-pair')\n"
        "attempt('pair-connect', pair)\n"
        "print(open('/proc/net/unix').read()[-3000:])\n"
    )


def _shm_victim(world: World) -> str:
    return probe(
        "for p in ('/dev/shm/lw-fresh', os.environ['TMPDIR'] + '/lw-fresh'):\n"
        "    try:\n        open(p, 'w').write(SECRET); print('wrote', p)\n"
        "    except OSError as e:\n        print('no', p, e.errno)\n"
        "open('tmpdir', 'w').write(os.environ['TMPDIR'])\n"
        "ready(); wait_stop()\n"
    )


def _shm_attack(world: World) -> str:
    victim_tmp = str(world.notes.get("victim_tmpdir", "/nonexistent"))
    return probe(
        "for p in ('/dev/shm', '/dev/shm/lw-fresh', "
        + hexpath(victim_tmp)
        + ", "
        + hexpath(victim_tmp)
        + " + '/lw-fresh'):\n"
        "    try:\n"
        "        print('LEAK', p, os.listdir(p) if os.path.isdir(p) else open(p).read())\n"
        "    except OSError as e:\n        print('closed', p, e.errno)\n"
        "    for op, fn in (('chmod', lambda: os.chmod(p, 0o777)), ('watch', lambda: libc.inotify_add_watch(libc.inotify_init1(0), p.encode(), 0xfff) >= 0 or 1/0)):\n"
        "        try:\n            fn(); print('REACHED', op, p)\n"
        "        except (OSError, ZeroDivisionError):\n            pass\n"
    )


def _shm_check(world: World, result: BashResult) -> None:
    assert SECRET not in result.stdout + result.stderr
    leaks = [ln for ln in result.stdout.splitlines() if ln.startswith("LEAK")]
    # Under bwrap the attacker's own /dev/shm and /tmp (private, empty) are there,
    # its own to change; the victim's file is in neither.
    assert all(ln in ("LEAK /dev/shm []", "LEAK /tmp []") for ln in leaks), leaks
    assert (
        "closed /dev/shm/lw-fresh" in result.stdout and "closed /tmp/lw-fresh" in result.stdout
    ) or world.backend == "landlock"
    if world.backend == "landlock":
        assert leaks == [] and "REACHED" not in result.stdout, result.stdout


def _links(world: World) -> str:
    python = os.path.realpath("/usr/bin/python3")
    org = world.data / "memory" / "org" / "policy.md"
    return probe(
        f"for i, src in enumerate(({hexpath(python)}, '/etc/passwd', {hexpath(org)}, {hexpath(world.canary / 'secret.txt')})):\n"
        "    attempt(f'link-{i}', lambda: os.link(src, f'l{i}'))\n"
        "    try:\n        fd = os.open(src, os.O_PATH)\n"
        "    except OSError:\n        continue\n"
        "    attempt(f'linkat-fd-{i}', lambda: os.link(f'/proc/self/fd/{fd}', f'm{i}', follow_symlinks=True))\n"
        "    attempt(f'linkat-empty-{i}', lambda: sc(265, fd, ctypes.addressof(ctypes.create_string_buffer(b'')), -100, ctypes.addressof(ctypes.create_string_buffer(f'n{i}'.encode())), 0x1000))\n"
        "    attempt(f'rename-{i}', lambda: os.rename(src, f'r{i}'))\n"
    )


def _links_check(world: World, result: BashResult) -> None:
    NOTHING_REACHED(world, result)
    assert os.stat(os.path.realpath("/usr/bin/python3")).st_nlink == world.notes["python_links"]
    for path in world.own.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert path.stat().st_nlink == 1 or path.stat().st_uid != 0, path


def _opath(world: World) -> str:
    org = world.data / "memory" / "org" / "policy.md"
    return probe(
        f"for name, p in (('secret', {hexpath(world.canary / 'secret.txt')}), ('shadow', '/etc/shadow'), ('org', {hexpath(org)}), ('canary', {hexpath(world.canary)})):\n"
        "    try:\n        fd = os.open(p, os.O_PATH)\n"
        "    except OSError as e:\n        print('opath', name, e.errno); continue\n"
        "    if name != 'org':\n"
        "        attempt(f'reopen-read-{name}', lambda: print(open(f'/proc/self/fd/{fd}').read()))\n"
        "    attempt(f'reopen-write-{name}', lambda: os.close(os.open(f'/proc/self/fd/{fd}', os.O_WRONLY)))\n"
        "    attempt(f'reopen-append-{name}', lambda: os.close(os.open(f'/proc/self/fd/{fd}', os.O_WRONLY | os.O_APPEND)))\n"
        "    attempt(f'truncate-{name}', lambda: os.truncate(f'/proc/self/fd/{fd}', 0))\n"
        "    if name == 'canary':\n"
        "        attempt('openat-secret', lambda: print(os.read(os.open('secret.txt', os.O_RDONLY, dir_fd=fd), 100)))\n"
        "        attempt('listdir-fd', lambda: print(os.listdir(os.open('.', os.O_RDONLY, dir_fd=fd))))\n"
        "        def via_chdir():\n"
        "            os.fchdir(fd); print(os.listdir('.')); print(open('secret.txt').read())\n"
        "        attempt('fchdir', via_chdir)\n"
    )


CHDIR_HOST = (
    'cd "$(python3 -c "print(bytes.fromhex(\'{hex}\').decode())")" && pwd && ls -la; cat secret.txt; '
    "find . -maxdepth 2; grep -r lw-fresh . ; tar cf - . | wc -c; du -a ."
)


FORK_BOMB = "bomb() { bomb | bomb & }; bomb; sleep 5; echo after"
THREADS = probe(
    "import threading\n"
    "stop = threading.Event(); n = 0\n"
    "try:\n"
    "    while n < 100000:\n"
    "        threading.Thread(target=stop.wait, daemon=True).start(); n += 1\n"
    "except RuntimeError as e:\n    print('stopped at', n, e)\n"
    "print('threads', n); time.sleep(1); stop.set()\n"
)
HUGE_ENV = (
    "export BIG=$(head -c 50M /dev/zero | tr '\\0' a); /bin/true; echo rc=$?; "
    'python3 -c \'import os; os.execv("/bin/echo", ["echo"] + ["x" * 100000] * 3000)\'; echo rc2=$?; '
    'echo "${#BIG}"'
)


def _chattr(world: World) -> str:
    org = world.data / "memory" / "org" / "policy.md"
    return probe(
        "open('pin', 'w').write('x')\n"
        f"for p in ('pin', '.', {hexpath(org)}):\n"
        "    for flag, name in ((0x10, 'immutable'), (0x20, 'append')):\n"
        "        def put():\n"
        "            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)\n"
        "            now = struct.unpack('l', fcntl.ioctl(fd, 0x80086601, bytes(8)))[0]\n"
        "            fcntl.ioctl(fd, 0x40086602, struct.pack('l', now | flag))\n"
        "        attempt(f'{p}:{name}', put)\n"
    )


def _chattr_check(world: World, result: BashResult) -> None:
    import fcntl
    import struct

    NOTHING_REACHED(world, result)
    for path in [world.own, *world.own.rglob("*"), world.data / "memory" / "org" / "policy.md"]:
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            continue
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            flags = struct.unpack("l", fcntl.ioctl(fd, 0x80086601, bytes(8)))[0]
        finally:
            os.close(fd)
        assert not flags & 0x30, (path, hex(flags))


CORE = "ulimit -c unlimited; ulimit -c; sh -c 'kill -SEGV $$'; python3 -c 'import os; os.abort()'; ls core* 2>&1; echo end"


def _chdir_check(world: World, result: BashResult) -> None:
    assert SECRET not in result.stdout + result.stderr
    for line in result.stdout.splitlines():
        assert not line.endswith((" secret.txt", "./secret.txt")), line


def _reader_victim(world: World) -> str:
    org = "/mnt/memory/org/policy.md"
    return (
        f"touch ready; sleep 1.5; for i in 1 2 3; do cat {org} >/dev/null; sleep 0.2; done; sleep 3"
    )


def _watch_shared(world: World) -> str:
    org = world.data / "memory" / "org"
    return probe(
        f"target = '/mnt/memory/org' if os.path.isdir('/mnt/memory/org') else {hexpath(org)}\n"
        "fd = libc.inotify_init1(0o4000)\n"
        "w = libc.inotify_add_watch(fd, target.encode(), 0x20 | 0x01)  # IN_OPEN | IN_ACCESS\n"
        "print('watch', 'up' if w >= 0 else 'refused', flush=True)\n"
        "data, end = b'', time.time() + (4 if w >= 0 else 0)\n"
        "while time.time() < end:\n"
        "    try:\n        data += os.read(fd, 65536)\n"
        "    except BlockingIOError:\n        time.sleep(0.05)\n"
        "print('seen', sorted(set(data.split(b'\\0')) & {b'policy.md'}))\n"
    )


def _watch_shared_check(world: World, result: BashResult) -> None:
    world.notes[f"shared-{world.backend}"] = result.stdout
    if world.backend == "landlock":
        assert "watch refused" in result.stdout and "seen []" in result.stdout, result.stdout
    else:  # README: not closed, a watch on a shared mount sees another agent's reads
        assert "watch up" in result.stdout, result.stdout
