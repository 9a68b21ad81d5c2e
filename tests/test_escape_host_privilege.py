"""Escape class: host privilege from a command. Under a root worker no command runs
as host uid 0: what it leaves in scratch or memory belongs to its agent's own uid, is
never setuid/setgid nor a device, and the data dir is closed to other users. Under
Landlock a command cannot signal the worker either."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal._sandbox._idrange import DEFAULT_IDS
from tests._escape_support import BACKENDS, PLANNER, WORKER, running

ATTACKS = [
    'cp "$(command -v python3)" /mnt/scratch/own/py; chmod 4755 /mnt/scratch/own/py',
    "cp /bin/true g; chmod g+s g; chmod u+s g; install -m 6755 /bin/true i",
    "mkdir -m 2755 sgid-dir; mkdir d; chmod 2755 d",
    "mknod null c 1 3; mknod disk b 8 0; mkfifo fifo",
    "python3 -c 'import os; os.open(\"s\", os.O_CREAT | os.O_WRONLY, 0o4755)'",
    "python3 -c 'import os; os.mkdir(\"sd\", 0o2755)'",
    # an unnamed file made setuid at creation, then given a name
    'python3 -c \'import ctypes, os; fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o4755); '
    'ctypes.CDLL(None).linkat(-100, f"/proc/self/fd/{fd}".encode(), -100, b"t", 0x400)\'',
]


def _privileged(root: Path) -> list[str]:
    """Every file under ``root`` that would give privilege on the host."""
    found = []
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            if st.st_mode & (stat.S_ISUID | stat.S_ISGID):
                found.append(f"setid {path}")
            if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
                found.append(f"device {path}")
    return found


@pytest.mark.parametrize("backend", BACKENDS)
async def test_nothing_a_command_leaves_gives_host_privilege(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    async with running(dev_env, data_dir, backend) as (bash, plugin):
        results = await bash.run(WORKER, [*ATTACKS, "ls -A", "echo alive"])
        scratch = plugin.config.scope_of(WORKER, "lw.Worker").own_scratch
    assert results[-1].stdout == "alive\n"
    assert "py" in results[-2].stdout.split()  # the copy itself was allowed
    _assert_unprivileged(data_dir, scratch)


def _assert_unprivileged(data_dir: Path, scratch: Path) -> None:
    assert _privileged(data_dir) == []
    if os.geteuid() == 0:
        owners = {os.lstat(p).st_uid for p in [scratch, *scratch.rglob("*")]}
        assert len(owners) == 1 and owners <= set(DEFAULT_IDS[1:]), owners  # the agent's own
        st = data_dir.stat()
        assert (stat.S_IMODE(st.st_mode), st.st_gid) == (0o750, DEFAULT_IDS[0])
        assert stat.S_IMODE(scratch.stat().st_mode) == 0o750
    else:
        assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700


async def test_memory_written_through_bash_is_plain(
    dev_env: WorkflowEnvironment, data_dir: Path
) -> None:
    async with running(dev_env, data_dir, "bwrap") as (bash, plugin):
        result = await bash.one(
            PLANNER,
            "echo x > /mnt/memory/workflow/a.md; chmod 4755 /mnt/memory/workflow/a.md; "
            "mkdir -m 2755 /mnt/memory/workflow/s; mknod /mnt/memory/workflow/n c 1 3; "
            "echo kept",
        )
        store = plugin.config.scope_of(PLANNER, "lw.Planner").mount_at("/mnt/memory/workflow")
    assert result.stdout == "kept\n"
    assert [c.path for c in result.memory_changes] == ["/mnt/memory/workflow/a.md"]
    assert store is not None
    assert (store.real / "a.md").read_text() == "x\n"
    assert _privileged(data_dir) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="the worker signals itself as root only")
@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_command_cannot_signal_or_stop_the_worker(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    me = os.getpid()
    async with running(dev_env, data_dir, backend) as (bash, _):
        hit = await bash.one(
            WORKER, f"kill -STOP {me}; kill -TERM {me}; kill -9 -1; prlimit --pid {me} --cpu=1:1"
        )
        after = await bash.one(WORKER, "echo alive")
    assert hit.exit_code != 0
    assert after.stdout == "alive\n"
