"""A commit that takes long (here: waiting for a store lock someone else holds) keeps
the ``lw.bash`` activity heartbeating, so it outlives a heartbeat timeout far shorter
than the wait and commits once the lock is free."""

from __future__ import annotations

import asyncio
import fcntl
import os
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal.memory import StoreKind, StoreRef
from tests._bash_support import SANDBOXES, bash_worker

HEARTBEAT_TIMEOUT = 5.0
HELD = 3 * HEARTBEAT_TIMEOUT


@pytest.mark.parametrize("sandbox", SANDBOXES[:1])  # only the overlay commits bash writes
async def test_a_long_commit_keeps_heartbeating(
    dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str
) -> None:
    target = f"beat-{uuid.uuid4().hex[:8]}"
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id=target)], sandbox=sandbox)
    store = StoreRef(StoreKind.WORKFLOW, target)
    state = plugin.memory.state_dir(store)
    state.mkdir(parents=True)
    lock = os.open(state / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        async with bash_worker(dev_env, plugin) as bash:
            running = asyncio.create_task(
                bash.run(
                    f"run_{target}@{uuid.uuid4().hex[:8]}",
                    ["echo kept > /mnt/memory/workflow/a.md"],
                    heartbeat_timeout_seconds=HEARTBEAT_TIMEOUT,
                )
            )
            await asyncio.sleep(HELD)
            assert not running.done(), "the commit waits for the lock"
            fcntl.flock(lock, fcntl.LOCK_UN)
            (result,) = await running
    finally:
        os.close(lock)
    assert result.exit_code == 0, result.stderr
    assert [c.path for c in result.memory_changes] == ["/mnt/memory/workflow/a.md"]
    assert (plugin.memory.root(store) / "a.md").read_text() == "kept\n"
