"""The text editor's scratch edits are made once under an activity retry, as its memory
edits are: a worker that died after an ``insert`` reached the file but before the
activity completed had the retry insert the text a second time, and a retried
``str_replace`` failed (``old_str`` was gone) for an edit that had been made. A retry
that finds the file without its edit (the worker died before the file was replaced)
makes it, once; another call's identical edit is its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._edit._records import ToolOutcome
from tests._native_support import planner_edit

PLANNER = "run_once@1"
FILE = "/mnt/scratch/own/plan.md"
AGAIN = f"The file {FILE} has been edited (by an earlier attempt of this call)."


async def _edit(
    plugin: LittleWorkflowPlugin, activity_id: str, attempt: int, **arguments: Any
) -> ToolOutcome:
    return await planner_edit(plugin, PLANNER, activity_id, attempt, path=FILE, **arguments)


async def test_a_retried_scratch_edit_is_made_once(data_dir: Path) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="once")])
    plugin.config.callers.enabled = False  # called directly, not from a workflow
    scratch = plugin.config.scope_of(PLANNER, "lw.Planner").own_scratch / "plan.md"

    made = await _edit(plugin, "c", 1, command="create", file_text="one\ntwo\n")
    again = await _edit(plugin, "c", 2, command="create", file_text="one\ntwo\n")
    assert not made.is_error and not again.is_error, again.text
    assert again.text == f"File created successfully at: {FILE}"

    first = await _edit(plugin, "i", 1, command="insert", insert_line=0, insert_text="zero")
    retried = await _edit(plugin, "i", 2, command="insert", insert_line=0, insert_text="zero")
    assert not first.is_error and (retried.is_error, retried.text) == (False, AGAIN)
    assert scratch.read_text() == "zero\none\ntwo\n"

    replaced = await _edit(plugin, "r", 1, command="str_replace", old_str="two", new_str="TWO")
    retried = await _edit(plugin, "r", 3, command="str_replace", old_str="two", new_str="TWO")
    assert not replaced.is_error and (retried.is_error, retried.text) == (False, AGAIN)
    assert scratch.read_text() == "zero\none\nTWO\n"

    # The worker died after noting the edit, before the file was replaced: redone once.
    await _edit(plugin, "d", 1, command="insert", insert_line=3, insert_text="three")
    scratch.write_text("zero\none\nTWO\n")
    redone = await _edit(plugin, "d", 2, command="insert", insert_line=3, insert_text="three")
    assert not redone.is_error and redone.text != AGAIN
    assert scratch.read_text() == "zero\none\nTWO\nthree\n"

    # Another call (a new activity) making the same edit is not a retry.
    other = await _edit(plugin, "e", 1, command="insert", insert_line=3, insert_text="three")
    assert not other.is_error and other.text != AGAIN
    assert scratch.read_text() == "zero\none\nTWO\nthree\nthree\n"

    # The notes are not in the agent's view: nothing new beside its file.
    assert sorted(p.name for p in scratch.parent.iterdir()) == ["plan.md"]
