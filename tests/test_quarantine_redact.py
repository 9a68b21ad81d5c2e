"""``memory redact`` reaches the quarantine: a tainted run's held copy of the redacted
text is scrubbed (and said so), so a later release cannot bring the text back."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef

from ._hierarchy_support import lw_worker
from ._privacy_support import PLANTED, secret_definition
from ._taint_support import WF, cli, command_planner, planner_id, run_planner


async def test_redaction_scrubs_held_changes(
    dev_env: WorkflowEnvironment,
    data_dir: Path,
    task_queue: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    definition = secret_definition()
    store = StoreRef(StoreKind.WORKFLOW, definition.id)
    stores = MemoryStores(DataLayout.at(data_dir))
    stores.write(store, "people.md", f"Met {PLANTED}.\n".encode(), provenance=Provenance.admin("x"))
    model = command_planner(definition.id)
    async with lw_worker(dev_env, data_dir, task_queue, [definition], model) as client:
        await run_planner(
            client,
            task_queue,
            definition.id,
            "t",
            f"echo 'Reviewed {PLANTED}' >> {WF}/people.md",
            untrusted=True,
        )
    tainted = planner_id(task_queue, definition.id, "t")

    code, out, err = await cli(
        capsys,
        "memory",
        "redact",
        "--data-dir",
        str(data_dir),
        "--by",
        "dpo",
        f"workflow:{definition.id}",
        "people.md",
        PLANTED,
    )
    assert code == 0, out + err
    assert "changed  quarantined changes" in out, out
    blobs = [p for p in (data_dir / ".lw" / "quarantine").rglob("*") if p.is_file()]
    assert not [p for p in blobs if PLANTED.encode() in p.read_bytes()]

    assert stores.release_quarantined(tainted, by="carol").applied
    text = stores.read(store, "people.md").content
    assert PLANTED not in text and "Reviewed [REDACTED]" in text, text
