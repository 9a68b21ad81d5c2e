"""Every way a tainted planner changes shared memory is held, and its own reads see
what it holds: the memory tools (write, append, replace, delete, rename), Claude's
memory tool and text editor, and bash; the store is untouched until the release,
which applies the run's view of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, ModelRequest, Role, ToolCall, WorkflowDefinition
from lw_temporal.ids import AgentId, DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import lw_worker

NOTES = WorkflowDefinition(id="notes")
STORE = StoreRef(StoreKind.WORKFLOW, "notes")
WF = "/mnt/memory/workflow"
M = "/memories/workflow"


def memory(command: str, **arguments: Any) -> ToolCall:
    return tool("memory", command=command, **arguments)


CALLS = [
    tool("memory_write", path=f"{WF}/a.md", content="one\n"),
    tool("memory_append", path=f"{WF}/a.md", content="two\n"),
    tool("memory_replace", path=f"{WF}/a.md", old="one", new="ONE"),
    memory("create", path=f"{M}/b.md", file_text="bee\n"),
    memory("str_replace", path=f"{M}/b.md", old_str="bee", new_str="BEE"),
    memory("rename", old_path=f"{M}/b.md", new_path=f"{M}/sub/c.md"),
    tool("str_replace_based_edit_tool", command="create", path=f"{WF}/d.md", file_text="dee\n"),
    tool("memory_delete", path=f"{WF}/x.md"),
    memory("view", path=M),
    tool("bash", command=f"cat {WF}/a.md {WF}/sub/c.md {WF}/d.md; ls {WF}"),
    tool("memory_list", path=WF),
]


def _report(request: ModelRequest) -> list[ToolCall]:
    texts = [f"{r.is_error} {r.text}" for r in request.last_results()]
    return [tool("finish", summary="\n=====\n".join(texts))]


async def test_every_way_in_is_held(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    stores.write(STORE, "x.md", b"seeded\n", provenance=Provenance.admin("seed"))
    model = ScriptedModel({("notes", Role.PLANNER): [CALLS, _report]})
    run = AgentId.planner("notes", task_queue)
    async with lw_worker(dev_env, data_dir, task_queue, [NOTES], model) as client:
        result: AgentResult = await client.execute_workflow(
            "lw.Planner", AgentInput(task="edit", untrusted=True), id=str(run),
            task_queue=task_queue, result_type=AgentResult,
        )  # fmt: skip
    outcomes = result.summary.split("\n=====\n")
    assert len(outcomes) == len(CALLS)
    assert [o for o in outcomes if not o.startswith("False ")] == []
    view, catted, listed = outcomes[-3:]
    assert "/memories/workflow/sub" in view and "x.md" not in view, view
    assert "ONE\ntwo\nBEE\ndee\n" in catted and "x.md" not in catted.split("dee")[-1], catted
    assert "a.md" in listed and "sub/c.md" in listed and "x.md" not in listed, listed

    # The store is as it was: only the seeded file, no audit line by the run.
    assert [e.path for e in stores.list_files(STORE).entries] == ["x.md"]
    assert all(e.workflow_id != str(run) for e in stores.audit(STORE))
    [held] = stores.quarantined()
    assert {(f.path, f.change) for f in held.files} == {
        ("a.md", "write"), ("sub", "mkdir"), ("sub/c.md", "write"), ("d.md", "write"),
        ("x.md", "delete"),
    }  # fmt: skip

    outcome = stores.release_quarantined(str(run), by="carol")
    assert outcome.applied
    assert stores.read(STORE, "a.md").content == "ONE\ntwo\n"
    assert stores.read(STORE, "sub/c.md").content == "BEE\n"
    assert stores.read(STORE, "d.md").content == "dee\n"
    assert not stores.read(STORE, "x.md").exists and not stores.read(STORE, "b.md").exists
