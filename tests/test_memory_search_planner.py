"""A planner's ``memory_search`` finds the note that answers a question phrased with
the note's words, ranked first, with the answering line's number; its system prompt
tells it the tool exists; a note it writes during the run is found at once (the commit
kept the index, no rebuild)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, ModelRequest, Role, ToolCall, WorkflowDefinition
from lw_temporal.ids import AgentId, DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import lw_worker
from ._search_support import ranked

HANDBOOK = WorkflowDefinition(id="handbook")
STORE = StoreRef(StoreKind.WORKFLOW, "handbook")
WF = "/mnt/memory/workflow"
NOTES = {
    "deploys/canary.md": (
        "# Canary deploys\n\nThe canary gets five percent of traffic for ten minutes.\n\n"
        "When the canary deploy times out, roll it back and retry with --force after ops "
        "approves.\n"
    ),
    "deploys/schedule.md": "# Deploy schedule\n\nWe deploy on Tuesdays and Thursdays.\n",
    "oncall.md": "# On call\n\nThe pager rotates every Monday; swap shifts in the sheet.\n",
    "lunch.md": "Lunch orders close at eleven. The cafeteria times its soup badly.\n",
    "reviews.md": "# Code review\n\nTwo approvals are needed; ops approves infra changes.\n",
    "incidents/2026-03.md": "The database failover took four minutes; ops rolled it back.\n",
    "style.md": "Use short sentences. Name files after what they hold.\n",
}
QUESTION = "what to do when the canary deploy times out"
seen: dict[str, Any] = {}


def _search(request: ModelRequest) -> list[ToolCall]:
    seen["mounts"] = request.mounts
    seen["tools"] = [t.name for t in request.tools]
    return [tool("memory_search", query=QUESTION)]


def _write_then_search(request: ModelRequest) -> list[ToolCall]:
    seen["first"] = request.last_results()[0]
    return [
        tool(
            "memory_write",
            path=f"{WF}/lessons/rollbacks.md",
            content="# Rollbacks\n\nA zebra-striped banner means the rollback finished.\n",
        ),
        tool("memory_search", query="zebra striped banner", limit=3),
    ]


def _finish(request: ModelRequest) -> list[ToolCall]:
    seen["second"] = request.last_results()[1]
    return [tool("finish", summary="done")]


MODEL = ScriptedModel({("handbook", Role.PLANNER): [_search, _write_then_search, _finish]})


async def test_planner_search_ranks_the_answer_first(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    for rel, text in NOTES.items():
        stores.write(STORE, rel, text.encode(), provenance=Provenance.admin("seed"))
    assert not stores.files(STORE).search.exists()  # commits never build an index

    run = AgentId.planner("handbook", task_queue)
    async with lw_worker(dev_env, data_dir, task_queue, [HANDBOOK], MODEL) as client:
        result = await client.execute_workflow(
            "lw.Planner", AgentInput(task="find it"), id=str(run), task_queue=task_queue,
            result_type=AgentResult,
        )  # fmt: skip
    assert result.summary == "done"

    assert "memory_search" in str(seen["mounts"])  # the mount description says so
    assert "memory_search" in seen["tools"]

    first = seen["first"]
    assert not first.is_error, first.text
    text = first.text
    order = ranked(text)
    assert order[0] == f"{WF}/deploys/canary.md", text
    # the answering line, with its line number in the file
    assert "   5: When the canary deploy times out, roll it back" in text, text
    assert "ranked by words (BM25); no embedder is configured" in text

    second = seen["second"]
    assert not second.is_error, second.text
    assert ranked(second.text)[0] == f"{WF}/lessons/rollbacks.md"
    assert "3: A zebra-striped banner" in second.text

    # one index generation: the note written during the run was indexed by its commit
    index_files = sorted(p.name for p in stores.files(STORE).search.dir.glob("index-*.db"))
    assert len(index_files) == 1, index_files
