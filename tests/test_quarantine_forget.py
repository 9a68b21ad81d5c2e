"""``forget`` reaches the quarantine: the held changes of the forgotten tree's runs are
erased (no byte of them left under the bookkeeping), the report names them, and the
quarantine's decision log says who forgot them; another tree's held changes stay."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores

from ._cli_support import cli
from ._hierarchy_support import lw_worker
from ._privacy_support import PLANTED, secret_definition
from ._taint_support import WF, command_planner, planner_id, run_planner


async def test_forget_erases_the_trees_held_changes(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    definition = secret_definition()
    stores = MemoryStores(DataLayout.at(data_dir))
    model = command_planner(definition.id)
    async with lw_worker(dev_env, data_dir, task_queue, [definition], model) as client:
        for token in ("gone", "kept"):
            await run_planner(
                client,
                task_queue,
                definition.id,
                token,
                f"echo 'Reviewed {PLANTED}' >> {WF}/people.md",
                untrusted=True,
            )
    forgotten, kept = (planner_id(task_queue, definition.id, t) for t in ("gone", "kept"))
    assert {r.workflow_id for r in stores.quarantined()} == {forgotten, kept}

    code, out, err = await cli(dev_env, "forget", forgotten, "--data-dir", str(data_dir),
                               "--by", "dpo", "--why", "request")  # fmt: skip
    assert code == 0, out + err
    assert f"quarantined changes {forgotten}" in out, out
    assert [r.workflow_id for r in stores.quarantined()] == [kept]
    held = sorted((data_dir / ".lw" / "quarantine").rglob("*"))
    holding = [p for p in held if p.is_file() and PLANTED.encode() in p.read_bytes()]
    assert len(holding) == 1  # the kept tree's blob, nothing of the forgotten one
    decisions = (data_dir / ".lw" / "audit" / "quarantine.jsonl").read_text()
    assert '"decision": "forget"' in decisions and '"by": "dpo"' in decisions
