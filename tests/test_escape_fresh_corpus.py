"""A second escape corpus, of attacks no earlier escape file makes (``tests/_fresh_attacks.py``
says which), each run through the real ``lw.bash`` activity as a worker step or a
planner on both backends. Around each one the host checks that nothing outside the
writable roots changed (a canary folder, the data dir, ``/etc``'s account files, the
kernel settings it wrote at), that its own processes and the other agents' are as they
were, that nothing of the agent outlived its command, and that the worker serves the
next command."""

from __future__ import annotations

# ruff: noqa: E501, ASYNC110, ASYNC220, ASYNC240  (a corpus; host checks are quick)
import asyncio
import hashlib
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from lw_temporal import BashResult, LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal.memory import Provenance, StoreKind, StoreRef
from lw_temporal.options import BashOptions, Limits
from tests import _fresh_attacks as fa
from tests._bash_support import bash_worker, snapshot
from tests._escape_support import BACKENDS
from tests._fresh_attacks import OTHER, PLANNER, SECRET, WORKER, Attack, World

MIB = 1 << 20
LIMITS = Limits(writable_bytes=256 * MIB, writable_entries=3000, memory=1024 * MIB)

ATTACKS: list[Attack] = [
    Attack(
        "inotify-host-folder",
        WORKER,
        fa._watch("inotify"),
        fa._watch_check,
        host_action=fa._make_secret_name,
    ),
    Attack(
        "fanotify-host-folder",
        WORKER,
        fa._watch("fanotify"),
        fa._watch_check,
        host_action=fa._make_secret_name,
    ),
    Attack("launcher-descriptors", WORKER, fa._launcher_fds, fa.NOTHING_REACHED),
    Attack("launcher-descriptors-planner", PLANNER, fa._launcher_fds, fa.NOTHING_REACHED),
    Attack("signals-by-other-routes", WORKER, fa._signals, fa._signals_check),
    Attack("host-device-nodes", WORKER, fa._devices, fa.NOTHING_REACHED),
    Attack("host-device-nodes-planner", PLANNER, fa._devices, fa.NOTHING_REACHED),
    Attack("host-setuid-binaries", WORKER, lambda w: fa.SETUID_RUN, fa._setuid_check),
    Attack("cgroup-escape-and-raise", WORKER, fa._cgroup, fa._no("REACHED", "moved")),
    Attack("cgroup-escape-planner", PLANNER, fa._cgroup, fa._no("REACHED", "moved")),
    Attack("proc-sys-and-sys-writes", WORKER, fa._proc_sys, fa.NOTHING_REACHED),
    Attack("proc-sys-writes-planner", PLANNER, fa._proc_sys, fa.NOTHING_REACHED),
    Attack("oom-score-lowered", WORKER, fa._oom, fa._oom_check),
    Attack("proc-self-attributes", WORKER, fa._proc_attr, fa._proc_attr_check),
    Attack("prctl-and-capabilities", WORKER, fa._prctl, fa._prctl_check),
    Attack("survivor-after-exit", WORKER, fa.survivor("echo started"), fa.nothing_left(WORKER)),
    Attack(
        "survivor-past-timeout", WORKER, fa.survivor("sleep 60"), fa.nothing_left(WORKER), timeout=3
    ),
    Attack("survivor-planner", PLANNER, fa.survivor("echo started"), fa.nothing_left(PLANNER)),
    Attack(
        "stdout-held-open",
        WORKER,
        lambda w: "setsid sleep 120 & (sleep 120 &) ; echo done",
        fa._quick,
    ),
    Attack("output-flood", WORKER, lambda w: fa.FLOOD, fa._flood_check, timeout=120),
    Attack(
        "control-characters-flood",
        WORKER,
        lambda w: (
            "head -c 30M /dev/zero | tr '\\0' '\\033' >&2; printf '\\033]0;pwned\\007\\033[2J\\r\\b'"
        ),
        fa._plain_result,
    ),
    Attack("random-bytes", WORKER, lambda w: "head -c 20M /dev/urandom", fa._plain_result),
    Attack(
        "hostile-names-over-quota",
        WORKER,
        lambda w: fa.HOSTILE_SCRATCH,
        fa._quota_check,
        timeout=60,
    ),
    Attack("odd-memory-names", PLANNER, lambda w: fa.ODD_MEMORY_NAMES, fa._odd_names_check),
    Attack("overlay-attributes", PLANNER, lambda w: fa.OVERLAY_XATTRS, fa._overlay_check),
    Attack("commit-symlink-swap", PLANNER, fa._swap, fa._swap_check),
    Attack(
        "ipc-between-agents",
        WORKER,
        fa._mq_attack,
        fa.NOTHING_REACHED,
        victim=(OTHER, fa._mq_victim),
    ),
    Attack(
        "abstract-socket-between-agents",
        WORKER,
        fa._abstract_attack,
        fa.NOTHING_REACHED,
        victim=(OTHER, fa._abstract_victim),
    ),
    Attack(
        "dev-shm-between-agents",
        WORKER,
        fa._shm_attack,
        fa._shm_check,
        victim=(OTHER, fa._shm_victim),
    ),
    Attack(
        "watch-a-shared-store",
        WORKER,
        fa._watch_shared,
        fa._watch_shared_check,
        victim=(OTHER, fa._reader_victim),
    ),
    Attack("hard-links-out-of-the-view", WORKER, fa._links, fa._links_check),
    Attack("o-path-reopen", WORKER, fa._opath, fa.NOTHING_REACHED),
    Attack(
        "chdir-into-host-folder",
        WORKER,
        lambda w: fa.CHDIR_HOST.format(hex=str(w.canary).encode().hex()),
        fa._chdir_check,
    ),
    Attack(
        "fork-bomb", WORKER, lambda w: fa.FORK_BOMB, fa.nothing_left(WORKER, beat=False), timeout=20
    ),
    Attack("thread-bomb", WORKER, lambda w: fa.THREADS, fa._plain_result, timeout=60),
    Attack("huge-env-and-argv", WORKER, lambda w: fa.HUGE_ENV, fa._plain_result),
    Attack("chattr-pin", WORKER, fa._chattr, fa._chattr_check),
    Attack("core-dump", WORKER, lambda w: fa.CORE, fa._no("core.", "REACHED")),
]

#: Host files whose bytes must not change (hashes before and after each attack).
HOST_FILES = (
    "/etc/passwd",
    "/etc/group",
    "/etc/shadow",
    *fa.PROC_SYS,
    "/proc/sys/kernel/core_pattern",
)


def _host_state() -> dict[str, str]:
    state = {}
    for name in HOST_FILES:
        try:
            data = Path(name).read_bytes()
        except OSError as err:
            data = f"<{err.errno}>".encode()
        state[name] = hashlib.sha256(data).hexdigest()
    return state


Results = dict[str, tuple[BashResult, list[str]]]


@pytest_asyncio.fixture(scope="module", loop_scope="session", params=BACKENDS)
async def world(
    request: pytest.FixtureRequest,
    dev_env: WorkflowEnvironment,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[World, Results]]:
    backend: str = request.param
    base = tmp_path_factory.mktemp(f"fresh-{backend}")
    data, canary = base / "data", base / "canary"
    canary.mkdir()
    canary.chmod(0o755)
    (canary / "secret.txt").write_text(SECRET)
    (canary / "secret.txt").chmod(0o644)
    plugin = LittleWorkflowPlugin(
        data, [WorkflowDefinition(id="cr")], sandbox=backend, bash=BashOptions(limits=LIMITS)
    )
    admin = Provenance.admin("test")
    plugin.memory.write(StoreRef(StoreKind.ORG, "org"), "policy.md", b"policy\n", provenance=admin)
    plugin.memory.write(
        StoreRef(StoreKind.WORKFLOW, "cr"), "notes.md", b"notes\n", provenance=admin
    )
    scope = plugin.config.scope_of(WORKER, "lw.Worker")
    planner = plugin.config.scope_of(PLANNER, "lw.Planner")
    store = planner.mount_at("/mnt/memory/workflow")
    assert store is not None
    sleeper = subprocess.Popen(["sleep", "3600"])
    w = World(
        backend=backend,
        data=data,
        canary=canary,
        own=scope.own_scratch,
        planner=planner.own_scratch,
        other=plugin.config.scope_of(OTHER, "lw.Worker").own_scratch,
        workflow_store=store.real,
        worker_pid=os.getpid(),
        sleeper_pid=sleeper.pid,
    )
    w.notes["worker_oom"] = Path("/proc/self/oom_score_adj").read_text()
    w.notes["python_links"] = os.stat(os.path.realpath("/usr/bin/python3")).st_nlink
    results: Results = {}
    own_sleeper: subprocess.Popen[bytes] | None = None
    writable = [
        w.own,
        w.planner,
        w.other,
        data / ".lw",
        store.real,
        base / "canary" / fa.SECRET_NAME,
    ]
    try:
        async with bash_worker(dev_env, plugin) as bash:
            for agent, path in ((WORKER, w.own), (PLANNER, w.planner), (OTHER, w.other)):
                await bash.one(agent, "true")
                w.uids[agent] = path.stat().st_uid
            if os.geteuid() == 0:  # a host process of the step's own uid, outside any sandbox
                uid = w.uids[WORKER]
                own_sleeper = subprocess.Popen(
                    ["sleep", "3600"], user=uid, group=uid, env={"TOKEN": SECRET}, cwd="/"
                )
                w.notes["own_sleeper"] = own_sleeper.pid
            for attack in ATTACKS:
                if backend not in attack.backends:
                    continue
                results[attack.name] = await _run(bash, w, attack, base, writable)
        dump = os.environ.get("LW_FRESH_DUMP")
        if dump:  # what each attack printed, for a reader of the corpus
            import json

            Path(f"{dump}-{backend}.json").write_text(
                json.dumps(
                    {k: [r.stdout[-1500:], r.stderr[-800:], p] for k, (r, p) in results.items()},
                    indent=1,
                )
            )
        yield w, results
    finally:
        for proc in (sleeper, own_sleeper):
            if proc is not None:
                proc.kill()
                proc.wait()


async def _run(
    bash: object, w: World, attack: Attack, base: Path, writable: list[Path]
) -> tuple[BashResult, list[str]]:
    from tests._bash_support import BashRunner

    assert isinstance(bash, BashRunner)
    problems: list[str] = []
    scratch = {WORKER: w.own, PLANNER: w.planner, OTHER: w.other}
    for folder in scratch.values():
        for name in ("ready", "stop", "beat"):
            (folder / name).unlink(missing_ok=True)
    (w.canary / fa.SECRET_NAME).unlink(missing_ok=True)
    w.notes["rss_before"] = fa._rss_kib()
    before, host_before = snapshot(base, skip=writable), _host_state()
    victim_task = None
    if attack.victim is not None:
        agent, build = attack.victim
        victim_task = asyncio.ensure_future(bash.one(agent, build(w), timeout_seconds=40))
        await _until(lambda: (scratch[agent] / "ready").exists() or victim_task.done())
        tmpdir = scratch[agent] / "tmpdir"
        if tmpdir.exists():
            w.notes["victim_tmpdir"] = tmpdir.read_text()
    task = asyncio.ensure_future(
        bash.one(attack.agent, attack.build(w), timeout_seconds=attack.timeout)
    )
    if attack.host_action is not None:
        await _until(lambda: (scratch[attack.agent] / "ready").exists() or task.done())
        attack.host_action(w)
        await asyncio.sleep(2)
        (scratch[attack.agent] / "stop").touch()
    result = await task
    if victim_task is not None:
        (scratch[attack.victim[0]] / "stop").touch()  # type: ignore[index]
        victim = await victim_task
        if victim.exit_code != 0:
            problems.append(f"the victim failed: {victim}")
    if attack.check is not None:
        try:
            await asyncio.to_thread(attack.check, w, result)
        except AssertionError as err:
            problems.append(f"check: {err}")
    (w.canary / fa.SECRET_NAME).unlink(missing_ok=True)
    after, host_after = snapshot(base, skip=writable), _host_state()
    if after != before:
        changed = sorted(set(after.items()) ^ set(before.items()))[:10]
        problems.append(f"changed outside the writable roots: {changed}")
    if host_after != host_before:
        problems.append(
            f"host files changed: {[k for k in host_before if host_before[k] != host_after[k]]}"
        )
    alive = await bash.one(OTHER, "echo alive")
    if alive.stdout != "alive\n":
        problems.append(f"the next command failed: {alive}")
    for pid in (w.sleeper_pid, int(w.notes.get("own_sleeper", 0))):
        if pid and not Path(f"/proc/{pid}").exists():
            problems.append(f"host process {pid} is gone")
    return result, problems


async def _until(condition: object, seconds: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not condition() and loop.time() < deadline:  # type: ignore[operator]
        await asyncio.sleep(0.05)


def test_the_corpus_is_large_enough() -> None:
    assert len(ATTACKS) >= 30


@pytest.mark.parametrize("name", [a.name for a in ATTACKS])
def test_attack_leaks_nothing_changes_nothing_breaks_nothing(
    world: tuple[World, Results], name: str
) -> None:
    w, results = world
    if name not in results:
        pytest.skip(f"not run on {w.backend}")
    result, problems = results[name]
    assert SECRET not in result.stdout + result.stderr, result.stdout[-2000:]
    assert problems == [], (problems, result.stdout[-3000:], result.stderr[-2000:])
