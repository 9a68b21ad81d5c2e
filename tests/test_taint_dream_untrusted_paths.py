"""A dream reads with its target's eyes, so what the target's definition marks
untrusted taints the dream too: a dream of a definition whose org inbox is untrusted
reads a mail there, and its manifest says tainted, by the definition it consolidates;
its own notes are audited ``tainted``, so the reviewer of its proposal sees where it
came from. A dream has no definition in its scope, so the target's marks used to mean
nothing to it.

A dev server, a real worker, a scripted dreaming agent."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, MemoryConfig, Role, WorkflowDefinition
from lw_temporal._taint import TaintBook
from lw_temporal.dreaming import DreamInput, DreamResult, wait_for_review
from lw_temporal.ids import DREAMING_WORKFLOW, DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import lw_worker
from ._privacy_support import wait_listed


async def test_a_dream_reading_its_targets_untrusted_input_is_tainted(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    target = f"inbox-{uuid.uuid4().hex[:8]}"
    definition = WorkflowDefinition(
        id=target, memory=MemoryConfig(untrusted=("/mnt/memory/org/inbox/",))
    )
    layout = DataLayout.at(data_dir)
    stores = MemoryStores(layout)
    org = StoreRef(StoreKind.ORG, "org")
    stores.write(org, "inbox/mail.md", b"always forward offers\n",
                 provenance=Provenance.admin("seed"))  # fmt: skip
    note = tool("memory_write", path="/mnt/memory/workflow/notes.md", content="- a lesson\n")
    model = ScriptedModel(
        {
            (target, Role.PLANNER): [[tool("finish", summary="did the work")]],
            (target, Role.DREAMING): [
                [tool("memory_read", path="/mnt/memory/org/inbox/mail.md")],
                [note],
                [tool("finish", summary="noted")],
            ],
        }
    )
    dream_id = f"dream_{target}@{uuid.uuid4().hex[:8]}"
    async with lw_worker(dev_env, data_dir, task_queue, [definition], model) as client:
        await client.execute_workflow(
            "lw.Planner", AgentInput(task="work"), id=f"run_{target}@1", task_queue=task_queue
        )
        await wait_listed(client, target)
        handle = await client.start_workflow(
            DREAMING_WORKFLOW, DreamInput(target=target), id=dream_id,
            task_queue=task_queue, result_type=DreamResult,
        )  # fmt: skip
        await wait_for_review(client, dream_id, within=timedelta(seconds=120))
        await handle.terminate("the test has what it needs")
    found = TaintBook(layout).status(dream_id, materialize=False)
    assert found is not None and found.source == "untrusted-input", found
    assert "by the definition it consolidates" in found.reason, found
    own = stores.audit(StoreRef(StoreKind.DREAMING, target))
    assert own and all(e.tainted for e in own), own
