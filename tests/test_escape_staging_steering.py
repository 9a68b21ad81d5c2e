"""Escape class: state carried from one command to the next through a reused overlay
staging folder. A planner's ``chmod 0``, ``touch -d @0`` and extended attribute on its
memory mount land on the overlay's root (the staging folder's upper folder), which the
worker keeps for the next command when nothing about it changed: the next planner, of
another workflow and store, and the same planner's next command see a fresh mount, and
neither store changed on the host. Under Landlock the memory mount is the store folder
itself, read-only, and the same calls are refused."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal.memory import Provenance, StoreKind, StoreRef
from tests._bash_support import bash_worker
from tests._escape_support import BACKENDS, shell_quote

PLANNER = "run_cr@steer"
OTHER = "run_other@steer"
MOUNT = "/mnt/memory/workflow"

STEER = (
    f"chmod 0 {MOUNT}; touch -d @0 {MOUNT}; "
    + "python3 -c "
    + shell_quote(f"import os; os.setxattr({MOUNT!r}, 'user.lw', b'planted')")
    + "; echo done"
)
LOOK = "python3 -c " + shell_quote(
    "import os, stat, time\n"
    f"st = os.stat({MOUNT!r})\n"
    "print(oct(stat.S_IMODE(st.st_mode)), int(time.time() - st.st_mtime) < 3600,\n"
    f"      os.listxattr({MOUNT!r}), sorted(os.listdir({MOUNT!r})))\n"
)


def _store_state(path: Path) -> tuple[object, ...]:
    st = os.lstat(path)
    return (st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns, tuple(os.listxattr(path)))


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_steered_memory_mount_reaches_no_later_command(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    plugin = LittleWorkflowPlugin(
        data_dir, [WorkflowDefinition(id="cr"), WorkflowDefinition(id="other")], sandbox=backend
    )
    admin = Provenance.admin("test")
    for key in ("cr", "other"):
        plugin.memory.write(StoreRef(StoreKind.WORKFLOW, key), "notes.md", b"n\n", provenance=admin)
    stores = [data_dir / "memory/workflows/cr", data_dir / "memory/workflows/other"]
    async with bash_worker(dev_env, plugin) as bash:
        await bash.one(PLANNER, "true")  # the leases give the stores their groups
        await bash.one(OTHER, "true")
        before = [_store_state(s) for s in stores]
        start = time.time()
        steered, again = await bash.run(PLANNER, [STEER, LOOK])
        other = await bash.one(OTHER, LOOK)
        after = [_store_state(s) for s in stores]
    assert steered.memory_changes == ()
    fresh = "0o755 True [] ['notes.md']\n"
    if backend == "bwrap":
        assert steered.stdout == "done\n", steered.stderr
        assert again.stdout == fresh, again
        assert other.stdout == fresh, other
    else:  # the store folders themselves: the calls are refused, nothing changes
        assert "Operation not permitted" in steered.stderr or steered.rejection
        assert other.stdout.split()[1:] == ["True", "[]", "['notes.md']"], other
    assert after == before
    assert all(os.lstat(s).st_mtime < start for s in stores)
