"""A dream that consolidates a tainted run reads what that run did, so it is tainted
too: its manifest says which run, its own notes say ``tainted``, and the promotion a
person approves lands audited as tainted and approved by them."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal._taint import TaintBook
from lw_temporal.dreaming import DefaultConsolidator, DreamStatus, approve_dream
from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, StoreKind, StoreRef

from ._dreaming_support import (
    Script,
    dreaming_worker,
    run_planners,
    start_dream,
    unique_definition,
    wait_for_status,
)
from ._taint_support import cli


async def test_a_dream_of_a_tainted_run_is_tainted(
    dev_env: WorkflowEnvironment,
    data_dir: Path,
    task_queue: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    target = unique_definition("review")
    layout = DataLayout.at(data_dir)
    scripts = [Script(commands=["true"], lessons=["pin the parser version"])] * 2
    async with dreaming_worker(dev_env, data_dir, task_queue, [target], gated=True) as client:
        tainted, _clean = await run_planners(client, task_queue, target, scripts)
        # As the egress proxy's check records it for a run that read a page:
        TaintBook(layout).taint(tainted, "network", "a command read 120 bytes of a page")
        handle = await start_dream(client, task_queue, target)
        await wait_for_status(handle, DreamStatus.AWAITING_APPROVAL)
        code, out, _ = await cli(capsys, "memory", "manifest", "--data-dir", str(data_dir),
                                 handle.id)  # fmt: skip
        assert code == 0 and f"consolidates tainted run {tainted}" in out, out
        await approve_dream(client, handle.id, "alice", "checked by hand")
        await handle.result()

    stores = MemoryStores(layout)
    own = stores.audit(StoreRef(StoreKind.DREAMING, target))
    assert own and all(e.tainted for e in own)
    [promoted] = stores.audit(StoreRef(StoreKind.WORKFLOW, target),
                              path=DefaultConsolidator.NOTE_PATH)  # fmt: skip
    assert promoted.tainted and promoted.actor == "alice"
