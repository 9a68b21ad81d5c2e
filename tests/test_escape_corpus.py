"""An escape corpus run as a worker step: every attempt must leak nothing and change
nothing outside the writable roots, while allowed reads and writes keep working.

Each attempt runs as its own ``lw.Worker`` execution on a real server; the data dir and
a canary folder outside it are snapshotted before and after every attempt.
"""

from __future__ import annotations

# ruff: noqa: E501  (the corpus reads best one attempt per line)
import asyncio
import base64
import os
import socket
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from lw_temporal import (
    AttachSpec,
    BashResult,
    LittleWorkflowPlugin,
    MemoryConfig,
    WorkflowDefinition,
)
from lw_temporal._sandbox._seccomp import syscall_number
from tests._bash_support import bash_worker, snapshot

WORKER = "pipeline_esc/sub-runs/run_cr@1/steps/step_1"
SECRET_ENV = "lw-secret-env-" + uuid.uuid4().hex
SECRET_FILE = "lw-secret-file-" + uuid.uuid4().hex
RO_MOUNTS = [
    "/mnt/memory/workflow",
    "/mnt/memory/pipeline",
    "/mnt/memory/org",
    "/mnt/memory/peer-workflows/peer",
    "/mnt/scratch/from-orchestrator",
    "/mnt/scratch/from-planner",
]


@dataclass
class World:
    data: Path
    canary: Path
    own: Path
    tcp_port: int
    tcp_hits: list[bytes]
    unix_path: str
    abstract_name: str
    unix_hits: list[bytes]
    sleeper: subprocess.Popen[bytes]
    results: dict[str, tuple[BashResult, bool]] = field(default_factory=dict)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# Each attempt: (id, command built from the world, extra check on the result).
Attempt = tuple[str, Callable[[World], str], Callable[[World, BashResult], None] | None]


def _no_entries(*names: str) -> Callable[[World, BashResult], None]:
    def check(world: World, result: BashResult) -> None:
        listed = set(result.stdout.split())
        assert not listed & set(names), listed & set(names)

    return check


def _fds_only_std(world: World, result: BashResult) -> None:
    fds = {int(x) for x in result.stdout.split()}
    assert fds <= {0, 1, 2, 3}, fds


def _sleeper_alive(world: World, result: BashResult) -> None:
    assert world.sleeper.poll() is None
    os.kill(world.sleeper.pid, 0)


def _no_tcp(world: World, result: BashResult) -> None:
    assert world.tcp_hits == []


def _no_unix(world: World, result: BashResult) -> None:
    assert world.unix_hits == []


def _only_loopback(world: World, result: BashResult) -> None:
    names = {line.split(":")[0].strip() for line in result.stdout.splitlines()[2:]}
    assert names <= {"lo"}, names


def _hostname_hidden(world: World, result: BashResult) -> None:
    assert socket.gethostname() not in result.stdout


def _caps_empty(world: World, result: BashResult) -> None:
    lines = [ln for ln in result.stdout.splitlines() if ln.startswith("Cap")]
    assert lines and all(ln.split()[1] == "0000000000000000" for ln in lines), lines


def _high_family_connect(address: str) -> str:
    """Connect to a unix ``address`` through a socket made by the raw call with a
    high bit in its family (``AF_UNIX | 1 << 32``, which the kernel reads as AF_UNIX)."""
    return (
        'python3 -c "import ctypes, socket; l = ctypes.CDLL(None); l.syscall.restype = ctypes.c_long; '
        f"fd = l.syscall(ctypes.c_long({syscall_number('socket')}), ctypes.c_long(1 | 1 << 32), "
        "ctypes.c_long(1), ctypes.c_long(0)); s = socket.socket(fileno=fd); "
        f"s.connect('{address}'); s.send(b'x')\""
    )


def _write_ro(mount: str) -> Callable[[World], str]:
    def build(world: World) -> str:
        return (
            f'd=$(echo {b64(mount)} | base64 -d); echo x > "$d/evil.md"; '
            f'mkdir "$d/dir"; rm -rf "$d"/*; touch "$d/notes.md"'
        )

    return build


ATTEMPTS: list[Attempt] = [
    # runtime-built paths
    ("subst-read", lambda w: f'cat "$(echo {w.canary})/secret.txt"', None),
    ("subst-write", lambda w: f'echo pwned > "$(echo {w.canary})/new.txt"', None),
    ("eval-write", lambda w: f"eval 'echo pwned > {w.canary}/eval.txt'", None),
    (
        "base64-read",
        lambda w: f'cat "$(echo {b64(str(w.canary / "secret.txt"))} | base64 -d)"',
        None,
    ),
    ("var-ro-memory", lambda w: 'x=/mnt/memory/work; echo pwned > "${x}flow/evil.md"', None),
    ("var-from-planner", lambda w: 'd=/mnt/scratch/from-plan; touch "${d}ner/evil"', None),
    ("state-dir-read", lambda w: f'cat "$(echo {w.data})/.lw/secret.txt"', None),
    ("runs-sibling", lambda w: 'p=/mnt/scratch; ls "$p/../../runs" "$p/../step_2" 2>&1', None),
    # interpreters
    ("python-read", lambda w: f"python3 -c \"print(open('{w.canary}/secret.txt').read())\"", None),
    ("python-write", lambda w: f"python3 -c \"open('{w.canary}/py.txt','w').write('x')\"", None),
    (
        "python-root",
        lambda w: "python3 -c \"import os; print(*os.listdir('/'))\"",
        _no_entries("root", "home", "var", "srv", "opt", "work", "boot"),
    ),
    ("python-env", lambda w: 'python3 -c "import os; print(dict(os.environ))"', None),
    (
        "perl-write",
        lambda w: f'perl -e \'open(F, ">", "{w.canary}/perl.txt") or die; print F 1\'',
        None,
    ),
    ("perl-env", lambda w: "perl -e 'print join(\"\\n\", %ENV)'", None),
    (
        "python-ro-memory",
        lambda w: "python3 -c \"open('/mnt/memory/org/policy.md','a').write('x')\"",
        None,
    ),
    # symlinks and hard links
    ("symlink-out", lambda w: f't={w.canary}; ln -s "$t" l; cat l/secret.txt', None),
    ("symlink-ro", lambda w: "ln -s /mnt/memory/workflow mw; echo x > mw/evil.md", None),
    ("hardlink-ro", lambda w: "ln /mnt/memory/workflow/notes.md h; echo x >> h", None),
    (
        "symlink-race",
        lambda w: (
            "(for i in $(seq 300); do ln -sfn /mnt/memory/org r; ln -sfn /tmp r; done) & "
            "for i in $(seq 300); do echo x 2>/dev/null > r/evil.md; done; wait"
        ),
        None,
    ),
    (
        "rename-ro",
        lambda w: "mv /mnt/memory/org/policy.md x 2>&1 || t=/mnt/memory/org; mv $t/policy.md y",
        None,
    ),
    # the worker saves long output into the own scratch: a planted symlink must not
    # redirect that write (done as the worker, outside any sandbox)
    (
        "output-folder-symlink",
        lambda w: (
            f't={w.canary}; rm -rf .bash-output; ln -s "$t" .bash-output; head -c 200000 /dev/zero'
        ),
        None,
    ),
    # /proc magic links
    (
        "proc-root",
        lambda w: f'cat "/proc/1/root$(echo {w.canary})/secret.txt"; ls /proc/1/root/',
        _no_entries("root", "home", "var", "work", "boot"),
    ),
    ("proc-environ", lambda w: "cat /proc/1/environ /proc/self/environ | tr '\\0' '\\n'", None),
    (
        "proc-all-environ",
        lambda w: "for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ; done",
        None,
    ),
    (
        "proc-ppid",
        lambda w: "ls -la /proc/$PPID/cwd/ /proc/$PPID/root/; cat /proc/$PPID/cmdline",
        None,
    ),
    (
        "proc-fds",
        lambda w: "python3 -c \"import os; print(*os.listdir('/proc/self/fd'))\"",
        _fds_only_std,
    ),
    (
        "proc-cwd-escape",
        lambda w: "cd /proc/self/cwd/../../..; pwd; ls",
        _no_entries("root", "home", "work"),
    ),
    # environment
    ("env", lambda w: "env; set", None),
    ("caps", lambda w: "grep Cap /proc/self/status", _caps_empty),
    ("hostname", lambda w: "hostname; cat /proc/sys/kernel/hostname", _hostname_hidden),
    ("dev-list", lambda w: "ls /dev", _no_entries("sda", "vda", "nvme0", "mem", "kmsg", "fuse")),
    # sockets
    ("tcp-bash", lambda w: f"echo hi > /dev/tcp/127.0.0.1/{w.tcp_port}", _no_tcp),
    (
        "tcp-python",
        lambda w: (
            f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {w.tcp_port}), 2).send(b'x')\""
        ),
        _no_tcp,
    ),
    (
        "unix-path",
        lambda w: (
            f"python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('{w.unix_path}'); s.send(b'x')\""
        ),
        _no_unix,
    ),
    (
        "unix-abstract",
        lambda w: (
            f"python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('\\0{w.abstract_name}'); s.send(b'x')\""
        ),
        _no_unix,
    ),
    (
        "tcp-fastopen",
        lambda w: (
            f"python3 -c \"import socket; socket.socket().sendto(b'x', socket.MSG_FASTOPEN, ('127.0.0.1', {w.tcp_port}))\""
        ),
        _no_tcp,
    ),
    ("unix-path-high-family", lambda w: _high_family_connect(w.unix_path), _no_unix),
    (
        "unix-abstract-high-family",
        lambda w: _high_family_connect(f"\\0{w.abstract_name}"),
        _no_unix,
    ),
    ("net-devices", lambda w: "cat /proc/net/dev", _only_loopback),
    # remounts and namespaces
    (
        "remount-rw",
        lambda w: "mount -o remount,rw /mnt/memory/workflow; echo x > /mnt/memory/workflow/evil.md",
        None,
    ),
    ("mount-tmpfs", lambda w: "mount -t tmpfs none /mnt/memory/org", None),
    (
        "unshare-remount",
        lambda w: (
            "unshare -rm sh -c 'mount -o remount,rw /mnt/memory/org; echo x > /mnt/memory/org/evil.md'"
        ),
        None,
    ),
    (
        "python-unshare",
        lambda w: "python3 -c \"import os; os.unshare(os.CLONE_NEWUSER); print('in')\"",
        None,
    ),
    (
        "nsenter",
        lambda w: "nsenter -t 1 -m -u -n -p true; nsenter --user=/proc/1/ns/user true",
        None,
    ),
    ("chroot", lambda w: "chroot / true", None),
    # killing processes outside
    ("kill-sleeper", lambda w: f"kill -9 {w.sleeper.pid}", _sleeper_alive),
    ("kill-all", lambda w: "kill -9 -1", _sleeper_alive),
    (
        "kill-worker",
        lambda w: f'python3 -c "import os, signal; os.kill({os.getpid()}, signal.SIGKILL)"',
        _sleeper_alive,
    ),
    # writes to every read-only mount through runtime-built paths
    *[(f"write-ro-{m.strip('/').replace('/', '-')}", _write_ro(m), None) for m in RO_MOUNTS],
]

#: Allowed work that must keep working in the same sandbox (positive controls).
CONTROLS: list[tuple[str, str, str]] = [
    ("read-memory", "cat /mnt/memory/workflow/notes.md", "workflow notes\n"),
    ("read-peer", "cat /mnt/memory/peer-workflows/peer/notes.md", "peer notes\n"),
    ("read-planner", "cat /mnt/scratch/from-planner/notes.md", "planner notes\n"),
    ("write-own", "echo mine > out.md && cat /mnt/scratch/own/out.md", "mine\n"),
    ("tmp", "echo t > /tmp/t && cat /tmp/t", "t\n"),
    ("python", "python3 -c 'print(6*7)'", "42\n"),
    ("pipe", "printf 'b\\na\\n' | sort | head -1", "a\n"),
    ("find", "find /mnt/memory -name '*.md' | sort | head -1", "/mnt/memory/org/notes.md\n"),
]


def _listener(world_hits: list[bytes]) -> Callable[[socket.socket], None]:
    def serve(server: socket.socket) -> None:
        server.settimeout(0.2)
        while True:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            world_hits.append(conn.recv(100) or b"<connect>")
            conn.close()

    return serve


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def world(
    dev_env: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[World]:
    async for w in run_corpus(dev_env, tmp_path_factory.mktemp("escape"), "bwrap", ATTEMPTS):
        yield w


async def run_corpus(
    dev_env: WorkflowEnvironment,
    base: Path,
    sandbox: str,
    attempts: list[Attempt],
    controls: list[tuple[str, str, str]] = CONTROLS,
) -> AsyncIterator[World]:
    """Run every attempt as its own worker step, snapshotting around each one."""
    data, canary = base / "data", base / "canary"
    canary.mkdir()
    (canary / "secret.txt").write_text(SECRET_FILE)
    definitions = [
        WorkflowDefinition(id="cr", memory=MemoryConfig(attach=(AttachSpec(id="peer"),))),
        WorkflowDefinition(id="peer"),
    ]
    plugin = LittleWorkflowPlugin(data, definitions, sandbox=sandbox)
    scope = plugin.config.scope_of(WORKER, "lw.Worker")
    for mount in scope.mounts:
        mount.real.mkdir(parents=True, exist_ok=True)
        name = mount.virtual.name if mount.virtual.name != "own" else "own"
        label = {"workflow": "workflow", "from-planner": "planner"}.get(name, name)
        (mount.real / "notes.md").write_text(f"{label} notes\n")
    (scope.layout.org_memory / "policy.md").write_text("policy\n")
    (data / ".lw").mkdir(exist_ok=True)
    (data / ".lw" / "secret.txt").write_text(SECRET_FILE)

    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    unix_path = str(canary / "sock")
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(unix_path)
    unix.listen()
    abstract_name = f"lw-escape-{uuid.uuid4().hex}"
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind("\0" + abstract_name)
    abstract.listen()
    tcp_hits: list[bytes] = []
    unix_hits: list[bytes] = []
    loop = asyncio.get_running_loop()
    servers = [
        loop.run_in_executor(None, _listener(tcp_hits), tcp),
        loop.run_in_executor(None, _listener(unix_hits), unix),
        loop.run_in_executor(None, _listener(unix_hits), abstract),
    ]
    sleeper = subprocess.Popen(["sleep", "3600"])  # noqa: ASYNC220 - started once, not awaited
    os.environ["LW_SECRET"] = SECRET_ENV
    w = World(
        data,
        canary,
        scope.own_scratch,
        tcp.getsockname()[1],
        tcp_hits,
        unix_path,
        abstract_name,
        unix_hits,
        sleeper,
    )
    writable = [
        scope.own_scratch,
        data / ".lw" / "staging",
        data / ".lw" / "locks",
        data / ".lw" / "sandbox",
        # The worker's own bookkeeping of the stores and runs a command touched.
        data / ".lw" / "stores",
        data / ".lw" / "manifests",
        data / ".lw" / "identities",  # the agents' leases of their uids
        data / ".lw" / "store-identities",  # and of their stores' groups
        data / ".lw" / "owners",
    ]
    try:
        async with bash_worker(dev_env, plugin) as bash:
            # The agent's first command gives its scratch and stores their owners and
            # modes (its uid's lease): done before anything is compared.
            await bash.one(WORKER, "true")
            for name, build, _ in attempts:
                before = snapshot(base, skip=writable)
                result = await bash.one(WORKER, build(w), timeout_seconds=60)
                after = snapshot(base, skip=writable)
                w.results[name] = (result, before == after)
            for name, command, _ in controls:
                w.results[name] = (await bash.one(WORKER, command), True)
        yield w
    finally:
        os.environ.pop("LW_SECRET", None)
        sleeper.kill()
        sleeper.wait()
        for s in (tcp, unix, abstract):
            s.close()
        await asyncio.gather(*servers)


def test_corpus_is_large_enough() -> None:
    assert len(ATTEMPTS) >= 40


@pytest.mark.parametrize(("name", "check"), [(a[0], a[2]) for a in ATTEMPTS])
def test_attempt_leaks_nothing_and_changes_nothing(
    world: World, name: str, check: Callable[[World, BashResult], None] | None
) -> None:
    result, unchanged = world.results[name]
    text = result.stdout + result.stderr
    assert SECRET_ENV not in text
    assert SECRET_FILE not in text
    assert str(world.data) not in result.stdout
    assert unchanged, f"{name} changed something outside the writable roots"
    if check is not None:
        check(world, result)


@pytest.mark.parametrize(("name", "expected"), [(c[0], c[2]) for c in CONTROLS])
def test_allowed_work_still_works(world: World, name: str, expected: str) -> None:
    result, _ = world.results[name]
    assert result.rejection is None
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected


def test_sleeper_outside_survived_the_corpus(world: World) -> None:
    assert world.sleeper.poll() is None
    assert world.tcp_hits == [] and world.unix_hits == []
    os.kill(world.sleeper.pid, 0)
