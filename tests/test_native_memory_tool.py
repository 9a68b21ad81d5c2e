"""Claude's memory tool, served by lw: an agent driven through the strict Anthropic
stand-in uses every command under ``/memories`` (its ``/mnt/memory``) and gets the
tool's documented results and errors, read-only where its role is; every change is
versioned and audited under its workflow, a rename on both names, and bash sees the
same files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, WorkflowDefinition
from lw_temporal.ids import AgentId, DataLayout
from lw_temporal.memory import MemoryStores, StoreKind, StoreRef
from lw_temporal.testing import tool

from ._hierarchy_support import lw_worker
from ._native_support import check_answers, scripted_claude
from ._provider_standins import NATIVE_TOOLS

NOTES = WorkflowDefinition(id="notes", instructions="Keep notes.")
M = "/memories/workflow"


def memory(command: str, **arguments: Any) -> Any:
    return tool("memory", command=command, **arguments)


STEPS = [
    memory("view", path="/memories"),
    memory("create", path=f"{M}/notes.md", file_text="alpha\nbeta\n"),
    memory("create", path=f"{M}/notes.md", file_text="again\n"),
    memory("view", path=f"{M}/notes.md"),
    memory("str_replace", path=f"{M}/notes.md", old_str="beta", new_str="gamma"),
    memory("str_replace", path=f"{M}/notes.md", old_str="zzz", new_str="y"),
    memory("create", path=f"{M}/twice.md", file_text="x\nx\n"),
    memory("str_replace", path=f"{M}/twice.md", old_str="x", new_str="y"),
    memory("insert", path=f"{M}/notes.md", insert_line=1, insert_text="inserted\n"),
    memory("insert", path=f"{M}/notes.md", insert_line=9, insert_text="far"),
    memory("view", path=f"{M}/notes.md", view_range=[2, 2]),
    tool("bash", command="cat /mnt/memory/workflow/notes.md"),
    memory("rename", old_path=f"{M}/notes.md", new_path=f"{M}/archive/notes.md"),
    memory("rename", old_path=f"{M}/twice.md", new_path=f"{M}/archive/notes.md"),
    memory("view", path=M),
    memory("create", path="/memories/org/policy.md", file_text="mine now\n"),
    memory("view", path="/memories/nope.md"),
    memory("view", path="/etc/passwd"),
    memory("view", path="/memories/../runs"),
    memory("delete", path=f"{M}/archive/notes.md"),
    memory("delete", path=f"{M}/archive/notes.md"),
    memory("delete", path=M),
    memory("undo_edit", path=f"{M}/twice.md"),
]
EXPECTED: list[tuple[str, bool]] = [
    (
        "Here're the files and directories up to 2 levels deep in /memories, excluding "
        "hidden items and node_modules:\n0B\t/memories\n0B\t/memories/org/\n"
        "0B\t/memories/workflow/",
        False,
    ),
    (f"File created successfully at: {M}/notes.md", False),
    (f"File {M}/notes.md already exists", True),
    (f"Here's the content of {M}/notes.md with line numbers:\n     1\talpha\n     2\tbeta", False),
    (
        "The memory file has been edited. Here is the snippet showing the change (with line "
        "numbers):\n     1\talpha\n     2\tgamma",
        False,
    ),
    (f"No replacement was performed, old_str `zzz` did not appear verbatim in {M}/notes.md.", True),
    (f"File created successfully at: {M}/twice.md", False),
    (
        "No replacement was performed. Multiple occurrences of old_str `x` in lines: 1, 2. "
        "Please ensure it is unique",
        True,
    ),
    (f"The file {M}/notes.md has been edited.", False),
    ("Invalid `insert_line` parameter: 9. It should be within the range [0, 3].", True),
    (f"Here's the content of {M}/notes.md with line numbers:\n     2\tinserted", False),
    ("exit code 0\nstdout:\nalpha\ninserted\ngamma\n", False),
    (f"Successfully renamed {M}/notes.md to {M}/archive/notes.md", False),
    (f"The destination {M}/archive/notes.md already exists", True),
    (
        f"Here're the files and directories up to 2 levels deep in {M}, excluding hidden "
        f"items and node_modules:\n25B\t{M}\n21B\t{M}/archive/\n21B\t{M}/archive/notes.md\n"
        f"4B\t{M}/twice.md",
        False,
    ),
    ("/memories/org/policy.md is read-only (/memories/org/ is ro): org memory is", True),
    ("The path /memories/nope.md does not exist. Please provide a valid path.", True),
    ("The memory tool works under /memories; got /etc/passwd", True),
    ("The path /memories/../runs contains '..'", True),
    (f"Successfully deleted {M}/archive/notes.md", False),
    (f"The path {M}/archive/notes.md does not exist", True),
    (f"Cannot delete the {M} directory itself", True),
    ("memory: invalid arguments", True),
]


async def test_every_memory_command_gets_its_documented_result(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    standin, model = scripted_claude("notes", STEPS)
    run = AgentId.planner("notes", task_queue)
    async with lw_worker(dev_env, data_dir, task_queue, [NOTES], model) as client:
        result = await client.execute_workflow(
            "lw.Planner", AgentInput(task="Take notes."), id=str(run), task_queue=task_queue,
            result_type=AgentResult,
        )  # fmt: skip
    assert standin.violations == []
    assert result.summary == "script ended"
    for body in standin.requests:
        kinds = {t.get("type"): t["name"] for t in body["tools"] if "type" in t}
        assert kinds == {kind: name for kind, (name, _) in NATIVE_TOOLS.items()}
        names = [t["name"] for t in body["tools"]]
        # The native memory tool replaces the memory_* functions; search has no native
        # counterpart and stays a function.
        assert not [n for n in names if n.startswith("memory_") and n != "memory_search"], names
        system = body["system"][0]["text"]
        assert "- /memories/workflow/ = /mnt/memory/workflow/ (rw)" in system
        assert "- /memories/org/ = /mnt/memory/org/ (ro)" in system

    check_answers(standin.requests[-1], STEPS, EXPECTED)

    stores = MemoryStores(DataLayout.at(data_dir))
    notes = StoreRef(StoreKind.WORKFLOW, "notes")
    audit = stores.audit(notes)
    ours = [e for e in audit if e.activity_type == "lw.memory.tool"]
    assert {e.workflow_id for e in audit} == {str(run)}
    assert {e.role for e in ours} == {"planner"}
    trail = [(e.op, e.path, e.detail) for e in ours]
    assert trail == [
        ("write", "notes.md", None),
        ("replace", "notes.md", None),
        ("write", "twice.md", None),
        ("write", "notes.md", None),
        ("rename", "archive/notes.md", {"from": "notes.md"}),
        ("rename", "notes.md", {"to": "archive/notes.md"}),
        ("delete", "archive/notes.md", None),
    ]
    # Each edit of notes.md is a kept version under the old name; the moved content is
    # the first version of the new name. The org store was never written.
    shas = [v.sha256 for v in stores.versions(notes, "notes.md")]
    assert len(set(shas)) == 3
    moved = stores.versions(notes, "archive/notes.md")
    assert moved[0].op == "rename" and moved[0].sha256 == shas[-1]
    assert stores.read_bytes(notes, "twice.md") == b"x\nx\n"
    assert stores.audit(StoreRef(StoreKind.ORG, "org")) == []
