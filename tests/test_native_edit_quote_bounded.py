"""A refused ``str_replace`` quotes at most ``QUOTE_CHARS`` of ``old_str`` back, whether
it did not occur or occurred more than once: the multiple-occurrences error quoted a
long ``old_str`` whole (a 60,000-character one came back at 60,000 characters, for the
model to read again on every later turn until cleared)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from temporalio.testing import ActivityEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._edit._commands import QUOTE_CHARS
from lw_temporal._edit._records import EditorRequest, ToolOutcome

PLANNER = "run_quote@1"
FILE = "/mnt/scratch/own/twice.txt"


async def _edit(plugin: LittleWorkflowPlugin, activity_id: str, **arguments: Any) -> ToolOutcome:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info, workflow_id=PLANNER, workflow_type="lw.Planner", activity_id=activity_id
    )
    return await env.run(plugin.edit_activities.edit, EditorRequest(path=FILE, **arguments))


async def test_a_refused_replace_quotes_a_bounded_old_str(data_dir: Path) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="quote")])
    plugin.config.callers.enabled = False  # called directly, not from a workflow
    long = "x" * 60_000
    made = await _edit(plugin, "c", command="create", file_text=f"{long}\n{long}\n")
    assert not made.is_error, made.text

    twice = await _edit(plugin, "r", command="str_replace", old_str=long, new_str="y")
    assert twice.is_error and "Multiple occurrences of old_str" in twice.text, twice.text[:200]
    assert "in lines 1, 2. Please ensure it is unique" in twice.text, twice.text[-200:]
    assert len(twice.text) < QUOTE_CHARS + 500, len(twice.text)

    absent = await _edit(plugin, "a", command="str_replace", old_str="z" * 60_000, new_str="y")
    assert absent.is_error and "did not appear verbatim" in absent.text, absent.text[:200]
    assert len(absent.text) < QUOTE_CHARS + 500, len(absent.text)
