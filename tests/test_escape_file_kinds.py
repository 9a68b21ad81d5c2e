"""Escape class: kinds of file an agent makes. In its scratch and in a writable memory
mount a command makes fifos, unix sockets, device nodes, setuid/setgid files, file
capabilities (``security.capability``), ``trusted.*`` attributes, symlinks out of
the mount and hard links. On the host: no device node, setuid/setgid file or file
capability exists anywhere in the data dir; memory keeps only files and folders (the
rest refused by name); and the worker's own readers of agent files (Claude's text
editor on scratch, redaction's reads) never block on a fifo put where a file was,
so the worker serves the next command at once."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import stat
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from lw_temporal._edit._records import EditorRequest
from lw_temporal._privacy._places import read_at
from lw_temporal.memory._fs import open_file_at
from tests._escape_support import BACKENDS, PLANNER, WORKER, running

MAKE_KINDS = (
    "mkfifo fifo; echo fifo=$?; "
    "python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"sock\")'; echo sock=$?; "
    "python3 -c 'import os; os.mknod(\"null\", 0o20666, os.makedev(1, 3))'; echo mknod=$?; "
    "echo data > real; cp /usr/bin/id py; chmod u+s py; echo suid=$?; chmod g+s py; "
    "echo sgid=$?; "
    'python3 -c \'import os; os.setxattr("real", "security.capability", '
    "bytes([1, 0, 0, 2]) + bytes(16))'; echo fcap=$?; "
    'python3 -c \'import os; os.setxattr("real", "trusted.x", b"1")\'; echo trusted=$?; '
    "ln -s /etc/shadow out; ln -s ../../.. up; ln real hard; echo made"
)


def _forbidden(root: Path) -> list[str]:
    found = []
    for path in [root, *root.rglob("*")]:
        st = os.lstat(path)
        if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
            found.append(f"device {path}")
        if stat.S_ISREG(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID):
            found.append(f"setuid/setgid {path}")
        if not stat.S_ISLNK(st.st_mode):
            names = os.listxattr(path, follow_symlinks=False)
            found += [f"{name} on {path}" for name in names if name.startswith("security.cap")]
            found += [f"{name} on {path}" for name in names if name.startswith("trusted.")]
    return found


@pytest.mark.parametrize("backend", BACKENDS)
async def test_no_file_kind_an_agent_makes_gives_it_anything(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    async with running(dev_env, data_dir, backend) as (bash, plugin):
        scratch_run, after = await bash.run(
            WORKER, [f"cd /mnt/scratch/own; {MAKE_KINDS}", "echo alive"]
        )
        memory_run = await bash.one(PLANNER, f"cd /mnt/memory/workflow; {MAKE_KINDS}")
    assert after.stdout == "alive\n"
    for result in (scratch_run, memory_run):
        for refused in ("mknod", "suid", "sgid", "fcap", "trusted"):
            assert f"{refused}=0" not in result.stdout, (refused, result.stdout)
    assert _forbidden(data_dir) == []
    store = plugin.config.scope_of(PLANNER, "lw.Planner")
    if backend == "bwrap":  # an overlay: what memory keeps of it
        assert "made" in memory_run.stdout
        refused_text = "\n".join(memory_run.memory_refused)
        for name in ("fifo", "sock", "out", "up"):
            assert f"/mnt/memory/workflow/{name}:" in refused_text, refused_text
        kept = {Path(c.path).name for c in memory_run.memory_changes}
        assert kept <= {"real", "hard", "py"}, kept
    else:  # read-only under Landlock: nothing made at all
        assert memory_run.memory_changes == ()
    for mount in store.mounts:
        if mount.store is not None and mount.real.is_dir():
            for path in mount.real.rglob("*"):
                st = os.lstat(path)
                assert stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode), path


async def test_the_workers_readers_do_not_block_on_an_agents_fifo(
    dev_env: WorkflowEnvironment, data_dir: Path
) -> None:
    async with running(dev_env, data_dir, "bwrap") as (bash, plugin):
        made = await bash.one(WORKER, "cd /mnt/scratch/own && mkfifo notes.md && echo made")
        assert made.stdout == "made\n"
        scratch = plugin.config.scope_of(WORKER, "lw.Worker").own_scratch
        # The editor's view of it says what it is, at once (called here directly, not
        # from a workflow: the caller checks are tried elsewhere).
        plugin.config.callers.enabled = False
        env = ActivityEnvironment()
        env.info = dataclasses.replace(env.info, workflow_id=WORKER, workflow_type="lw.Worker")
        view = EditorRequest(command="view", path="/mnt/scratch/own/notes.md")
        outcome = await asyncio.wait_for(env.run(plugin.edit_activities.edit, view), 30)
        assert outcome.is_error and "not a regular file" in outcome.text
        # A file swapped for a fifo between a check and the read (a parallel command):
        # the worker's own openers return at once instead of waiting for a writer.
        fd = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with pytest.raises(Exception, match="not a regular file"):
                await asyncio.wait_for(
                    asyncio.to_thread(open_file_at, fd, "notes.md", "notes.md"), 10
                )
        finally:
            os.close(fd)
        gone = await asyncio.wait_for(asyncio.to_thread(read_at, scratch, scratch / "notes.md"), 10)
        assert gone is None
        again = await bash.one(WORKER, "echo alive")
    assert again.stdout == "alive\n"
