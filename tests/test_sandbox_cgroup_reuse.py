"""Command cgroups survive being removed behind the worker's back.

An idle command cgroup is empty, so anyone with the right can remove it: a sweep by
another worker, an administrator. A worker that reused such a folder launched into a
cgroup that no longer existed (``launch failed: [Errno 19] No such device``). Now a
reused cgroup is checked (its folders still there, the same inodes) when it is taken
and again right before the launch, and made anew where it is gone; and a worker's
sweep judges only folders of workers of its own pid namespace, so a worker that is
pid 1 of its own (which sees none of the host's pids) removes nothing of the host's.
Everything here runs real cgroups, real ``unshare`` and real ``lw.bash`` commands."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._sandbox._cgroupfs import _INIT_PID_NAMESPACE, _gone_worker, _pid_namespace
from lw_temporal._sandbox._cgroups import _IDLE, command_cgroups
from tests._bash_support import bash_worker
from tests._escape_support import BACKENDS, WORKER

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not command_cgroups().hierarchies,
    reason="needs root and a writable cgroup hierarchy",
)

MIB = 1 << 20
#: A bound of all commands together no other test uses, so these cgroups are ours.
TOTAL = 1536 * MIB
#: A pid no process has (above the kernel's largest).
NO_PID = 4_194_305


def _rmdir_idle(path: Path) -> None:
    """Remove an idle cgroup folder. An idle cgroup may still list its last command's
    processes while they die (``CommandCgroup.close`` kills them without waiting, and
    a process stays listed until it is reaped; ``create`` reuses it only once empty),
    and the kernel may refuse for a moment after the last one left (a memory cgroup is
    busy until the exited task is released): so it is tried again for up to 5 s, and a
    process still listed then is a real failure."""
    deadline = time.monotonic() + 5
    while True:
        try:
            path.rmdir()
            return
        except OSError as err:
            if err.errno != errno.EBUSY:
                raise
            if time.monotonic() > deadline:
                procs = (path / "cgroup.procs").read_text().split()
                assert procs == [], f"an idle command cgroup still holds {procs} after 5 s: {path}"
                raise
        time.sleep(0.05)


def _remove_idle() -> int:
    """Remove every idle command cgroup's folders, as a stray sweep did."""
    removed = 0
    for idle in _IDLE.values():
        for cgroup in idle:
            for folder in cgroup.folders:
                if folder.path.is_dir():
                    _rmdir_idle(folder.path)
                    removed += 1
    return removed


def test_an_idle_cgroup_removed_is_made_anew() -> None:
    support = command_cgroups()
    first = support.create(64 * MIB, 64, TOTAL)
    assert first is not None
    first.close()  # idle, empty: removable by anyone
    assert _remove_idle() >= 1
    again = support.create(64 * MIB, 64, TOTAL)
    assert again is not None and again is not first
    assert again.intact()
    with again.born_inside():  # the launch's own step: no "No such device"
        pass
    again.close()


def test_a_cgroup_removed_after_its_check_is_renewed_before_the_launch() -> None:
    support = command_cgroups()
    cgroup = support.create(64 * MIB, 64, TOTAL)
    assert cgroup is not None
    old = [f.path for f in cgroup.folders]
    for path in old:
        path.rmdir()
    assert not cgroup.intact()
    cgroup.prepare()  # what the launch does, as root, right before the fork
    assert cgroup.intact() and [f.path for f in cgroup.folders] != old
    with cgroup.born_inside():
        pass
    cgroup.close()


def test_the_sweep_judges_only_workers_of_its_own_pid_namespace() -> None:
    mine = _pid_namespace()
    assert _gone_worker(f"lw-{NO_PID}-abc123n{mine}")
    assert _gone_worker(f"lw-{NO_PID}-abc123n{mine}-m1024")
    assert _gone_worker(f"lw-sandboxes-{NO_PID}-512n{mine}")
    assert not _gone_worker(f"lw-{os.getpid()}-abc123n{mine}")  # alive
    assert not _gone_worker(f"lw-{NO_PID}-abc123n{mine + 1}")  # another namespace's
    assert not _gone_worker(f"lw-sandboxes-{NO_PID}-512n{mine + 1}")
    # An older version's untagged names: judged by the host's namespace only.
    assert _gone_worker(f"lw-{NO_PID}-abc123") == (mine == _INIT_PID_NAMESPACE)
    assert not _gone_worker("lw-not-a-worker")


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
def test_a_worker_in_its_own_pid_namespace_removes_nothing_of_the_hosts(tmp_path: Path) -> None:
    support = command_cgroups()
    cgroup = support.create(64 * MIB, 64, TOTAL)
    assert cgroup is not None
    cgroup.close()  # idle and empty, tagged with the host's namespace
    # And a folder as an older worker of the host names it, whose pid (this test's)
    # the new namespace does not see.
    host = support.hierarchies[0].base.parent
    untagged = host / f"lw-{os.getpid()}-fedcba"
    untagged.mkdir()
    try:
        probe = "from lw_temporal._sandbox._cgroups import command_cgroups; command_cgroups()"
        done = subprocess.run(
            ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", probe],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert cgroup.intact(), "the other namespace's worker swept a live worker's cgroup"
        assert untagged.is_dir()
    finally:
        untagged.rmdir()
        cgroup.remove()
        _IDLE.get((64 * MIB, 64, TOTAL), []).clear()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_commands_run_after_their_idle_cgroups_are_removed(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")], sandbox=backend)
    async with bash_worker(dev_env, plugin) as bash:
        for _ in range(3):
            result = await bash.one(WORKER, "echo ran")
            assert result.exit_code == 0 and result.stdout == "ran\n", result
            assert "launch failed" not in result.stderr
            _remove_idle()
