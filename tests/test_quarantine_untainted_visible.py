"""An untainted planner's writes are visible at once, by the same paths as before taint
existed: no held changes, no taint record, audit lines without a ``tainted`` field."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import WorkflowDefinition
from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, StoreKind, StoreRef

from ._hierarchy_support import lw_worker
from ._taint_support import NEXT, WF, command_planner, run_planner

NOTES = WorkflowDefinition(id="notes")
STORE = StoreRef(StoreKind.WORKFLOW, "notes")


async def test_an_untainted_write_is_visible_at_once(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    async with lw_worker(dev_env, data_dir, task_queue, [NOTES], command_planner("notes")) as c:
        await run_planner(
            c, task_queue, "notes", "writer",
            f"echo 'good lesson' >> {WF}/lessons.md{NEXT}memory_read {WF}/lessons.md",
        )  # fmt: skip
        assert stores.read(STORE, "lessons.md").content == "good lesson\n"
        seen = await run_planner(c, task_queue, "notes", "reader", f"cat {WF}/lessons.md")
        assert "good lesson" in seen

    assert stores.quarantined() == []
    state = data_dir / ".lw"
    assert not (state / "quarantine").exists() and not (state / "taint").exists()
    raw = state / "stores" / "workflow" / "notes" / "audit.jsonl"
    lines = [json.loads(x) for x in raw.read_text().splitlines()] if raw.exists() else []
    entries = stores.audit(STORE)
    assert entries and not any(e.tainted for e in entries)
    assert all("tainted" not in line for line in lines)
