"""``memory quarantine reject`` drops a tainted run's held changes: the store never
sees them (the next planner reads the store as it was), nothing is held any more, and
the decision is audited with who rejected it and why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import WorkflowDefinition
from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, StoreKind, StoreRef

from ._hierarchy_support import lw_worker
from ._taint_support import NEXT, WF, cli, command_planner, planner_id, run_planner

NOTES = WorkflowDefinition(id="notes")
STORE = StoreRef(StoreKind.WORKFLOW, "notes")


async def test_rejected_changes_never_reach_the_store(
    dev_env: WorkflowEnvironment,
    data_dir: Path,
    task_queue: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    tainted = planner_id(task_queue, "notes", "tainted")
    async with lw_worker(dev_env, data_dir, task_queue, [NOTES], command_planner("notes")) as c:
        await run_planner(
            c, task_queue, "notes", "tainted",
            f"mkdir -p {WF}/new && echo planted > {WF}/new/note.md{NEXT}"
            f"echo more >> {WF}/lessons.md",
            untrusted=True,
        )  # fmt: skip
        [held] = stores.quarantined()
        assert {f.path for f in held.files} == {"new", "new/note.md", "lessons.md"}

        code, out, err = await cli(capsys, "memory", "quarantine", "reject", "--data-dir",
                                   str(data_dir), "--by", "dana", "--why", "prompt injection",
                                   tainted)  # fmt: skip
        assert (code, err) == (0, "")
        assert f"rejected 3 path(s) of {tainted} in workflow:notes by dana" in out

        after = await run_planner(c, task_queue, "notes", "after", f"ls -R {WF}; echo done")
        assert "planted" not in after and "note.md" not in after and "lessons.md" not in after

    assert stores.quarantined() == []
    assert stores.list_files(STORE).entries == ()
    assert stores.audit(STORE) == []  # the store was never touched
    [decision] = [
        json.loads(line)
        for line in (data_dir / ".lw" / "audit" / "quarantine.jsonl").read_text().splitlines()
    ]
    assert decision["decision"] == "reject" and decision["by"] == "dana"
    assert decision["why"] == "prompt injection" and decision["workflow_id"] == tainted
    code, _out, err = await cli(capsys, "memory", "quarantine", "reject", "--data-dir",
                                str(data_dir), "--by", "dana", tainted)  # fmt: skip
    assert code == 1 and "holds no changes in quarantine" in err
