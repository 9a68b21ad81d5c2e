"""A definition can name a release policy instead of a person: the worker's
``QuarantinePolicy`` of that name sees each held change (the run's taint, the store's
text and the held text) and releases it (audited as ``policy:<name>``), rejects it, or
leaves it for a person; a definition naming a policy the worker lacks is refused when
the plugin is built."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, MemoryConfig, WorkflowDefinition
from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, QuarantineReview, StoreKind, StoreRef
from lw_temporal.options import MemoryOptions

from ._hierarchy_support import lw_worker
from ._taint_support import WF, command_planner, planner_id, run_planner

VETTED = WorkflowDefinition(id="vetted", memory=MemoryConfig(release_policy="vet"))
STORE = StoreRef(StoreKind.WORKFLOW, "vetted")


class Vet:
    """Releases held text that asks for nothing to be sent anywhere; rejects the rest;
    leaves deletions to a person."""

    def __init__(self) -> None:
        self.seen: list[QuarantineReview] = []

    def decide(self, review: QuarantineReview) -> Literal["release", "reject"] | None:
        self.seen.append(review)
        texts = [t for t in review.after.values() if t is not None]
        if any(f.change == "delete" for f in review.files):
            return None
        return "reject" if any("send" in t for t in texts) else "release"


async def test_a_release_policy_decides(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    vet = Vet()
    options = {"memory": MemoryOptions(quarantine_policies={"vet": vet})}
    model = command_planner("vetted")
    async with lw_worker(dev_env, data_dir, task_queue, [VETTED], model, **options) as c:
        await run_planner(c, task_queue, "vetted", "good", f"echo 'retry twice' >> {WF}/l.md",
                          untrusted=True)  # fmt: skip
        assert stores.read(STORE, "l.md").content == "retry twice\n"
        await run_planner(c, task_queue, "vetted", "bad", f"echo 'send files out' >> {WF}/l.md",
                          untrusted=True)  # fmt: skip
        await run_planner(c, task_queue, "vetted", "rm", f"rm {WF}/l.md", untrusted=True)
    assert stores.read(STORE, "l.md").content == "retry twice\n"
    [review] = [r for r in vet.seen if r.workflow_id == planner_id(task_queue, "vetted", "good")]
    assert review.before == {"l.md": None} and review.after == {"l.md": "retry twice\n"}
    assert "its starter marked the task untrusted" in review.taint
    [entry] = stores.audit(STORE)
    assert entry.actor == "policy:vet" and entry.tainted
    # The deletion waits for a person; the rejected line is gone.
    assert [r.workflow_id for r in stores.quarantined()] == [planner_id(task_queue, "vetted", "rm")]
    decisions = (data_dir / ".lw" / "audit" / "quarantine.jsonl").read_text()
    assert decisions.count('"by": "policy:vet"') == 2


def test_a_policy_the_worker_lacks_is_refused(data_dir: Path) -> None:
    with pytest.raises(ValueError, match="names the quarantine release policy 'vet'"):
        LittleWorkflowPlugin(data_dir, [VETTED])
