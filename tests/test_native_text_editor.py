"""Claude's text editor, served by lw: driven through the strict Anthropic stand-in, an
agent views, creates, str_replaces and inserts in its scratch and its memory with the
editor's documented results; what it creates in scratch is its own (its bash appends
to it), memory edits are versioned and audited, read-only mounts refuse, and a link
the agent planted in its scratch is never followed to the host."""

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

PLAN = WorkflowDefinition(id="plan")
OWN = "/mnt/scratch/own"
REVIEW = "Review the changes and make sure they are as expected"
HOST_FILE = Path("/etc/hostname")


def edit(command: str, **arguments: Any) -> Any:
    return tool("str_replace_based_edit_tool", command=command, **arguments)


STEPS = [
    edit("create", path=f"{OWN}/plan.md", file_text="one\ntwo\n"),
    edit("create", path=f"{OWN}/plan.md", file_text="again\n"),
    edit("view", path=f"{OWN}/plan.md"),
    edit("str_replace", path=f"{OWN}/plan.md", old_str="two", new_str="TWO"),
    edit("insert", path=f"{OWN}/plan.md", insert_line=0, insert_text="zero"),
    tool("bash", command=f"echo more >> {OWN}/plan.md && cat {OWN}/plan.md"),
    edit("create", path="/mnt/memory/workflow/lesson.md", file_text="learned\n"),
    edit("view", path="/memories/workflow"),
    edit("create", path="/mnt/memory/org/x.md", file_text="x\n"),
    # Link targets the pre-check cannot see: the kernel lets a link be made, the editor
    # must not follow it on the host.
    tool("bash", command=f't=/etc; h={HOST_FILE}; mkdir d && ln -s "$t" d/etc && ln -s "$h" host'),
    edit("view", path=f"{OWN}/host"),
    edit("create", path=f"{OWN}/d/etc/lw-evil.conf", file_text="owned\n"),
    edit("str_replace", path=f"{OWN}/host", old_str="a", new_str="b"),
    edit("view", path="/mnt/scratch"),
    edit("view", path=f"{OWN}/plan.md", view_range=[9, 10]),
    edit("view", path="/mnt/elsewhere/x"),
    edit("undo_edit", path=f"{OWN}/plan.md"),
    tool("bash", restart=True),
]
EXPECTED: list[tuple[str, bool]] = [
    (f"File created successfully at: {OWN}/plan.md", False),
    (f"File already exists at: {OWN}/plan.md. Cannot overwrite files using command `create`", True),
    (f"Here's the result of running `cat -n` on {OWN}/plan.md:\n     1\tone\n     2\ttwo", False),
    (
        f"The file {OWN}/plan.md has been edited. Here's the result of running `cat -n` on a "
        f"snippet of {OWN}/plan.md:\n     1\tone\n     2\tTWO\n{REVIEW}",
        False,
    ),
    (
        f"The file {OWN}/plan.md has been edited. Here's the result of running `cat -n` on a "
        f"snippet of the edited file:\n     1\tzero\n     2\tone\n     3\tTWO\n{REVIEW}",
        False,
    ),
    ("exit code 0\nstdout:\nzero\none\nTWO\nmore\n", False),
    ("File created successfully at: /mnt/memory/workflow/lesson.md", False),
    (
        "Here's the files and directories up to 2 levels deep in /memories/workflow, "
        "excluding hidden items:\n/memories/workflow\n/memories/workflow/lesson.md",
        False,
    ),
    ("/mnt/memory/org/x.md is read-only (/mnt/memory/org/ is ro)", True),
    ("exit code 0", False),
    (f"{OWN}/host is a symbolic link; it is never followed", True),
    (f"{OWN}/d/etc/lw-evil.conf: 'etc' is a symbolic link", True),
    (f"{OWN}/host: 'host' is a symbolic link", True),
    (
        "Here's the files and directories up to 2 levels deep in /mnt/scratch, excluding "
        f"hidden items:\n/mnt/scratch\n{OWN}/\n{OWN}/d/\n{OWN}/plan.md",
        False,
    ),
    ("Invalid `view_range`: [9, 10]. Its first element `9` should be within the range", True),
    ("The path /mnt/elsewhere/x does not exist. Please provide a valid path.", True),
    ("str_replace_based_edit_tool: invalid arguments", True),
    ("The shell has been restarted.", False),
]


def _host() -> tuple[bytes, bool]:
    return HOST_FILE.read_bytes(), Path("/etc/lw-evil.conf").exists()


def _scratch_files(scratch: Path) -> tuple[str, list[Path]]:
    """plan.md's text and any temporary file left behind."""
    return (scratch / "plan.md").read_text(), list(scratch.glob(".lw-tmp-*"))


async def test_the_text_editor_edits_scratch_and_memory_within_the_mounts(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    host_before = _host()
    standin, model = scripted_claude("plan", STEPS)
    run = AgentId.planner("plan", task_queue)
    async with lw_worker(dev_env, data_dir, task_queue, [PLAN], model) as client:
        await client.execute_workflow(
            "lw.Planner", AgentInput(task="Plan."), id=str(run), task_queue=task_queue,
            result_type=AgentResult,
        )  # fmt: skip
    assert standin.violations == []
    editor = [t for t in standin.requests[0]["tools"] if t.get("type") == "text_editor_20250728"]
    assert editor == [
        {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool",
         "max_characters": 32_000}
    ]  # fmt: skip
    check_answers(standin.requests[-1], STEPS, EXPECTED)

    # Nothing on the host changed through the planted links.
    assert _host() == host_before
    scratch = DataLayout.at(data_dir).scratch(run)
    assert _scratch_files(scratch) == ("zero\none\nTWO\nmore\n", [])
    stores = MemoryStores(DataLayout.at(data_dir))
    audit = stores.audit(StoreRef(StoreKind.WORKFLOW, "plan"))
    assert [(e.op, e.path, e.activity_type, e.workflow_id) for e in audit] == [
        ("write", "lesson.md", "lw.edit", str(run))
    ]
