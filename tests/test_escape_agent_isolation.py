"""Escape class: one agent reaching another through what the kernel counts per uid
or through file metadata. Under a root worker each agent runs as a host uid of its own
(leased from ``BashOptions(sandbox_ids)``), so an agent that fills its process limit,
renices "all its processes" or stats, chmods, touches, tags or watches another agent's
scratch or a store it does not mount reaches nothing of theirs; a step still reads its
planner's scratch. Checked on the host: owners and modes, the victims' files and
processes, through the real ``lw.bash`` activity on both backends."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import time
from collections.abc import Iterable
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._sandbox._idrange import DEFAULT_IDS
from lw_temporal._sandbox._leases import IdentityPool, PoolExhausted
from lw_temporal.memory import Provenance, StoreKind, StoreRef
from lw_temporal.options import BashOptions
from tests._bash_support import BashRunner, bash_worker
from tests._escape_support import BACKENDS, shell_quote

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="a non-root worker has one uid")

PLANNER = "pipeline_iso/sub-runs/run_cr@1"
STEP_1 = f"{PLANNER}/steps/step_1"
STEP_2 = f"{PLANNER}/steps/step_2"
OTHER = "pipeline_iso/sub-runs/run_other@1"
ADMIN = Provenance.admin("test")


def _plugin(data_dir: Path, backend: str, **bash: object) -> LittleWorkflowPlugin:
    return LittleWorkflowPlugin(
        data_dir,
        [WorkflowDefinition(id="cr"), WorkflowDefinition(id="other")],
        sandbox=backend,
        bash=BashOptions(**bash),  # type: ignore[arg-type]
    )


def _scratch(plugin: LittleWorkflowPlugin, workflow_id: str) -> Path:
    role = "lw.Worker" if "/steps/" in workflow_id else "lw.Planner"
    return plugin.config.scope_of(workflow_id, role).own_scratch


def _processes_of(uid: int) -> list[int]:
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/status") as status:
                uids = next(line for line in status if line.startswith("Uid:")).split()[1:]
        except (OSError, StopIteration):
            continue
        if str(uid) in uids:
            found.append(int(pid))
    return found


async def _leased(bash: BashRunner, plugin: LittleWorkflowPlugin, *agents: str) -> list[int]:
    """The uids of ``agents``, each of which has run a first command (its lease)."""
    for agent in agents:
        await bash.one(agent, "true")
    return [_owner(_scratch(plugin, agent)) for agent in agents]


def _owner(path: Path) -> int:
    return path.stat().st_uid


async def _until(condition: object, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.05)


@root_only
@pytest.mark.parametrize("backend", BACKENDS)
async def test_each_agent_has_its_own_uid_and_steps_read_their_planner(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    plugin = _plugin(data_dir, backend)
    async with bash_worker(dev_env, plugin) as bash:
        await bash.one(PLANNER, "echo plan > plan.md")
        read = await bash.one(STEP_1, "cat /mnt/scratch/from-planner/plan.md; echo 1 > s1.txt")
        await bash.one(STEP_2, "echo 2 > s2.txt")
        await bash.one(OTHER, "echo o > o.txt")
    assert read.stdout == "plan\n", read.stderr
    _assert_own_uids(plugin, data_dir)


def _assert_own_uids(plugin: LittleWorkflowPlugin, data_dir: Path) -> None:
    owners = {}
    for agent in (PLANNER, STEP_1, STEP_2, OTHER):
        scratch = _scratch(plugin, agent)
        st = scratch.stat()
        assert stat.S_IMODE(st.st_mode) == 0o750 and st.st_gid == st.st_uid, agent
        assert {p.stat().st_uid for p in scratch.iterdir()} == {st.st_uid}, agent
        owners[agent] = st.st_uid
    assert len(set(owners.values())) == 4, owners  # four agents, four uids
    assert set(owners.values()) <= set(DEFAULT_IDS[1:])
    st = data_dir.stat()
    assert (stat.S_IMODE(st.st_mode), st.st_gid) == (0o750, DEFAULT_IDS[0])
    steps = _scratch(plugin, STEP_1).parent.parent
    assert stat.S_IMODE(steps.stat().st_mode) == 0o711  # passable, not listable


@root_only
@pytest.mark.parametrize("backend", BACKENDS)
async def test_one_agent_at_its_process_limit_stops_no_other(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    plugin = _plugin(data_dir, backend)
    async with bash_worker(dev_env, plugin) as bash:
        uid, _ = await _leased(bash, plugin, STEP_1, STEP_2)
        # 520 background sleeps: the agent's uid (and command) is at its limit of 512.
        hog = asyncio.ensure_future(
            bash.one(STEP_1, "for i in $(seq 520); do sleep 60 & done 2>/dev/null; wait",
                     timeout_seconds=12)
        )  # fmt: skip
        await _until(lambda: len(_processes_of(uid)) >= 500 or hog.done())
        assert not hog.done()
        others = await bash.run(
            STEP_2, ["echo alive", "for i in 1 2 3; do (true) & done; wait; echo forked"]
        )
        result = await hog
    assert [r.stdout for r in others] == ["alive\n", "forked\n"], others
    assert all(r.exit_code == 0 for r in others)
    assert result.timed_out
    await _until(lambda: _processes_of(uid) == [])  # nothing of it outlives its command


@root_only
@pytest.mark.parametrize("backend", BACKENDS)
async def test_renicing_its_user_reaches_no_other_agent(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    plugin = _plugin(data_dir, backend)
    async with bash_worker(dev_env, plugin) as bash:
        _, uid = await _leased(bash, plugin, STEP_1, STEP_2)
        victim = _scratch(plugin, STEP_2)
        waiting = asyncio.ensure_future(
            bash.one(STEP_2, "until [ -e stop ]; do sleep 0.05; done; echo done",
                     timeout_seconds=60)
        )  # fmt: skip
        await _until(lambda: len(_processes_of(uid)) >= 2)
        before = _nices(_processes_of(uid))
        renice = (
            "import os\n"
            f"for who in (0, {uid}):\n"
            "    try:\n"
            "        os.setpriority(os.PRIO_USER, who, 19)\n"
            "        print('reniced', who)\n"
            "    except OSError as e:\n"
            "        print('refused', who, e.errno)\n"
        )
        attack = f"python3 -c {shell_quote(renice)}"
        hit = await bash.one(STEP_1, attack)
        after = _nices(pid for pid in before if pid in _processes_of(uid))
        (victim / "stop").touch()
        done = await waiting
    assert done.stdout == "done\n"
    assert after and all(after[pid] == before[pid] for pid in after), (before, after, hit.stdout)
    assert f"reniced {uid}" not in hit.stdout


def _nices(pids: Iterable[int]) -> dict[int, int]:
    """Each process's nice value; one that exited meanwhile (the waiting loop's short
    ``sleep``s come and go) is left out."""
    found = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat_file:
                found[pid] = int(stat_file.read().rsplit(")", 1)[1].split()[16])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


#: Metadata calls against other agents' files and stores, by the real host path (what
#: Landlock's ``$PWD`` gives away; under bwrap those paths do not exist at all).
_METADATA = """
import ctypes, errno, json, os
data = bytes.fromhex(%r).decode()
libc = ctypes.CDLL(None, use_errno=True)
def watch(p):
    fd = libc.inotify_init1(0)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "inotify_init1")
    if libc.inotify_add_watch(fd, p.encode(), 0x100 | 0x200 | 0x2) < 0:
        raise OSError(ctypes.get_errno(), "inotify_add_watch")
ops = {
    "stat": os.stat, "chmod": lambda p: os.chmod(p, 0), "utime": lambda p: os.utime(p, (0, 0)),
    "touch": lambda p: os.utime(p, None), "setxattr": lambda p: os.setxattr(p, "user.lw", b"x"),
    "watch": watch, "list": os.listdir,
}
out = {}
for name, rel in json.loads(%r).items():
    out[name] = {}
    for op, fn in ops.items():
        try:
            fn(os.path.join(data, rel)); out[name][op] = 0
        except OSError as err:
            out[name][op] = err.errno
print(json.dumps(out))
"""

TARGETS = {
    "sibling-scratch": "runs/pipeline_iso/sub-runs/run_cr@1/steps/step_1/scratch",
    "sibling-file": "runs/pipeline_iso/sub-runs/run_cr@1/steps/step_1/scratch/secret.txt",
    "run-folder": "runs/pipeline_iso/sub-runs/run_cr@1/steps",
    "other-store": "memory/workflows/other",
    "other-store-file": "memory/workflows/other/note.md",
    "mounted-store-file": "memory/org/policy.md",
    "bookkeeping": ".lw/stores",
}
#: What may succeed per target (it concerns nothing of another agent): a folder's own
#: stat (one the agent may pass by), and reading and watching a store it mounts.
ALLOWED = {
    "sibling-scratch": {"stat"},
    "run-folder": {"stat"},
    "other-store": {"stat"},
    "bookkeeping": {"stat"},
    "mounted-store-file": {"stat", "watch"},
}


def _state(path: Path) -> tuple[object, ...]:
    """Owner, mode and extended attributes (and times, of a file: a folder's change
    with the entries the worker makes in it meanwhile)."""
    st = os.lstat(path)
    times = () if stat.S_ISDIR(st.st_mode) else (st.st_mtime_ns, st.st_ctime_ns)
    return (st.st_mode, st.st_uid, st.st_gid, *times, tuple(os.listxattr(path)))


@root_only
@pytest.mark.parametrize("backend", BACKENDS)
async def test_metadata_of_other_agents_and_stores_is_closed(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    plugin = _plugin(data_dir, backend)
    plugin.memory.write(StoreRef(StoreKind.WORKFLOW, "other"), "note.md", b"n\n", provenance=ADMIN)
    plugin.memory.write(StoreRef(StoreKind.ORG, "org"), "policy.md", b"p\n", provenance=ADMIN)
    script = _METADATA % (str(data_dir).encode().hex(), json.dumps(TARGETS))
    async with bash_worker(dev_env, plugin) as bash:
        await bash.one(STEP_1, "echo secret > secret.txt")
        await bash.one(OTHER, "true")  # the other store is mounted by its own agent
        victims = {name: data_dir / rel for name, rel in TARGETS.items()}
        before = {name: _state(path) for name, path in victims.items()}
        result = await bash.one(STEP_2, f"python3 -c {shell_quote(script)}")
        after = {name: _state(path) for name, path in victims.items()}
    assert result.exit_code == 0, result.stderr
    outcome = json.loads(result.stdout)
    for name, ops in outcome.items():
        for op, code in ops.items():
            if op in ALLOWED.get(name, set()):
                continue
            assert code != 0, f"{op} of {name} went through ({backend})"
    assert after == before


@root_only
async def test_a_number_is_never_leased_to_two_agents_at_once(
    dev_env: WorkflowEnvironment, data_dir: Path
) -> None:
    first = 0x7E000000 + (os.getpid() % 4096) * 16
    # The shared group and three numbers: a planner's own, its store's and org's.
    plugin = _plugin(data_dir, "bwrap", sandbox_ids=range(first, first + 4))
    async with bash_worker(dev_env, plugin) as bash:
        ok = await bash.one("run_cr@1", "echo one")
        with pytest.raises(WorkflowFailureError) as failed:
            await bash.one("run_cr@2", "echo two")  # the same stores, but a new agent
    assert ok.stdout == "one\n"
    cause: BaseException | None = failed.value.cause
    while cause is not None and "leased" not in str(cause):
        cause = getattr(cause, "cause", None)
    assert cause is not None and "are leased" in str(cause)


@root_only
def test_a_reused_number_first_takes_the_old_scratch_back(tmp_path: Path) -> None:
    first = 0x7D000000 + (os.getpid() % 4096) * 16
    claims = tmp_path / "claims"
    pool = IdentityPool(tmp_path / "a", range(first, first + 3), grace=0, host_claims=claims)
    old = tmp_path / "old-scratch"
    (old / "sub").mkdir(parents=True)
    (old / "sub" / "notes.txt").write_text("agent a's\n")
    number = pool.lease("run:a", old, "run", time.time() - 120)  # ended long ago
    assert {p.stat().st_uid for p in (old, old / "sub", old / "sub" / "notes.txt")} == {number}
    new = tmp_path / "new-scratch"
    new.mkdir()
    again = pool.lease("run:b", new, "run", time.time())
    assert again == number and new.stat().st_uid == number
    assert {(p.stat().st_uid, p.stat().st_gid) for p in (old, old / "sub" / "notes.txt")} == {
        (0, 0)
    }
    # Another runs root on this host sees the live lease and takes no number of it.
    other = IdentityPool(tmp_path / "b", range(first, first + 3), grace=600, host_claims=claims)
    pool.lease("run:b", new, "run", time.time() + 600)
    with pytest.raises(PoolExhausted):
        other.lease("run:c", tmp_path / "c", "run", time.time())


#: Takes every inotify instance the kernel gives one uid (``max_user_instances``) and
#: holds them until the file ``stop`` appears.
_INOTIFY_HOG = """
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
held = []
while len(held) < 100000:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    held.append(fd)
print("held", len(held), ctypes.get_errno(), flush=True)
while not os.path.exists("stop"):
    time.sleep(0.05)
"""
_INOTIFY_ONE = (
    "import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
    "print('mine' if libc.inotify_init1(0) >= 0 else ctypes.get_errno())"
)


@root_only
@pytest.mark.parametrize("backend", BACKENDS)
async def test_one_agent_out_of_inotify_instances_leaves_others_theirs(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    plugin = _plugin(data_dir, backend)
    async with bash_worker(dev_env, plugin) as bash:
        await _leased(bash, plugin, STEP_1, STEP_2)
        hog = asyncio.ensure_future(
            bash.one(STEP_1, f"python3 -c {shell_quote(_INOTIFY_HOG)}", timeout_seconds=60)
        )
        own = _scratch(plugin, STEP_1)
        await _until(lambda: _holds_inotify(_owner(own)) or hog.done())
        other = await bash.one(STEP_2, f"python3 -c {shell_quote(_INOTIFY_ONE)}")
        _touch(own / "stop")
        held = await hog
    assert "held" in held.stdout, held
    assert other.stdout == "mine\n", (other, held.stdout)


def _holds_inotify(uid: int) -> bool:
    """Whether processes of ``uid`` hold the kernel's whole per-uid inotify allowance."""
    limit = int(Path("/proc/sys/fs/inotify/max_user_instances").read_text())
    count = 0
    for pid in _processes_of(uid):
        try:
            count += sum(
                os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:inotify"
                for fd in os.listdir(f"/proc/{pid}/fd")
            )
        except OSError:
            continue
    return count >= limit


def _touch(path: Path) -> None:
    path.touch()
