"""An attempt of a text editor call that was paused (a stopped or stuck worker) and goes
on after a later attempt of the same call made the edit, and after the agent's next
call changed the file again, writes nothing: it is superseded, and says so. Before,
it wrote the content it had computed from the file as it first read it over the later
change (paused between its read and its write), or, paused before it began, made the
edit a second time on top of it.

The pause is real: the first attempt runs in a worker process of its own, held once it
has read the file and computed its edit (and stopped, SIGSTOP, meanwhile), until the
test lets it go on."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
from pathlib import Path
from typing import Any

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._edit import _files
from lw_temporal._edit._records import ToolOutcome
from tests._native_support import planner_edit

PLANNER = "run_late@1"
FILE = "/mnt/scratch/own/plan.md"


def _plugin(data_dir: Path) -> LittleWorkflowPlugin:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="late")])
    plugin.config.callers.enabled = False  # called directly, not from a workflow
    return plugin


async def _edit(
    plugin: LittleWorkflowPlugin, activity_id: str, attempt: int, **arguments: Any
) -> ToolOutcome:
    return await planner_edit(plugin, PLANNER, activity_id, attempt, path=FILE, **arguments)


def _paused_attempt(data_dir: str, at_write: Any, go_on: Any, report: Any) -> None:
    """Attempt 1 of call "i", held just before it writes the edit it computed."""
    original = _files.Files._put

    def put(self: Any, place: Any, data: bytes, expected: str | None) -> None:
        at_write.set()
        go_on.wait()
        original(self, place, data, expected)

    _files.Files._put = put  # type: ignore[method-assign]
    plugin = _plugin(Path(data_dir))
    outcome = asyncio.run(_edit(plugin, "i", 1, command="insert", insert_line=0, insert_text="0"))
    report.put((outcome.is_error, outcome.text))


async def test_a_paused_attempt_does_not_overwrite_a_later_change(data_dir: Path) -> None:
    plugin = _plugin(data_dir)
    scratch = plugin.config.scope_of(PLANNER, "lw.Planner").own_scratch / "plan.md"
    made = await _edit(plugin, "c", 1, command="create", file_text="one\ntwo\n")
    assert not made.is_error, made.text

    ctx = multiprocessing.get_context("spawn")
    at_write, go_on, report = ctx.Event(), ctx.Event(), ctx.Queue()
    late = ctx.Process(
        target=_paused_attempt, args=(str(data_dir), at_write, go_on, report), daemon=True
    )
    late.start()
    try:
        assert late.pid is not None
        assert await asyncio.to_thread(at_write.wait, 60), "attempt 1 never got to its write"
        os.kill(late.pid, signal.SIGSTOP)
        # attempt 2 (the activity timed out meanwhile) makes the edit; the agent's next
        # call changes the file again
        again = await _edit(plugin, "i", 2, command="insert", insert_line=0, insert_text="0")
        assert not again.is_error, again.text
        later = await _edit(plugin, "n", 1, command="str_replace", old_str="two", new_str="2")
        assert not later.is_error, later.text
        assert scratch.read_text() == "0\none\n2\n"

        os.kill(late.pid, signal.SIGCONT)
        go_on.set()
        is_error, text = report.get(timeout=60)
        late.join(timeout=60)
    finally:
        if late.is_alive():
            late.kill()
    assert scratch.read_text() == "0\none\n2\n"  # the later change is kept
    assert not is_error and "superseded" in text and "attempt 2" in text, text


async def test_an_attempt_begun_late_does_not_edit_again(data_dir: Path) -> None:
    plugin = _plugin(data_dir)
    scratch = plugin.config.scope_of(PLANNER, "lw.Planner").own_scratch / "plan.md"
    await _edit(plugin, "c", 1, command="create", file_text="one\ntwo\n")
    # attempt 2 ran while attempt 1 was stuck before it began; the next call followed
    again = await _edit(plugin, "i", 2, command="insert", insert_line=0, insert_text="0")
    later = await _edit(plugin, "n", 1, command="str_replace", old_str="two", new_str="2")
    assert not again.is_error and not later.is_error
    late = await _edit(plugin, "i", 1, command="insert", insert_line=0, insert_text="0")
    assert scratch.read_text() == "0\none\n2\n"
    assert not late.is_error and "superseded" in late.text and "attempt 2" in late.text, late.text


async def test_a_change_between_read_and_write_is_kept(data_dir: Path) -> None:
    """Not a retry: two calls of one reply editing one file in parallel. The write is a
    compare-and-set, as in memory: the one that read first reads again and edits that."""
    plugin = _plugin(data_dir)
    scratch = plugin.config.scope_of(PLANNER, "lw.Planner").own_scratch / "plan.md"
    await _edit(plugin, "c", 1, command="create", file_text="one\ntwo\n")
    ctx = multiprocessing.get_context("spawn")
    at_write, go_on, report = ctx.Event(), ctx.Event(), ctx.Queue()
    first = ctx.Process(
        target=_paused_attempt, args=(str(data_dir), at_write, go_on, report), daemon=True
    )
    first.start()
    try:
        assert await asyncio.to_thread(at_write.wait, 60), "the first call never got to its write"
        other = await _edit(plugin, "n", 1, command="str_replace", old_str="two", new_str="2")
        assert not other.is_error, other.text
        go_on.set()
        is_error, text = report.get(timeout=60)
        first.join(timeout=60)
    finally:
        if first.is_alive():
            first.kill()
    assert scratch.read_text() == "0\none\n2\n"  # both edits
    assert not is_error and "superseded" not in text, text
