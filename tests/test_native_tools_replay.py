"""A recorded planner run that used Claude's native tools (the text editor in scratch
and in memory, the memory tool, bash) replays on today's code: the ``lw.edit`` and
``lw.memory.tool`` activities the workflow scheduled, and what it did with their
results, are part of what a change to workflow code must keep.

Re-record after an intended, versioned change with ``LW_RECORD_HISTORIES=1 pytest
tests/test_native_tools_replay.py`` and commit ``tests/histories/native-tools-planner.json``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowHistory
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from lw_temporal import AgentInput, AgentResult, LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal.options import PrivacyOptions
from lw_temporal.testing import tool

from ._hierarchy_support import lw_worker
from ._native_support import scripted_claude

HISTORY = Path(__file__).parent / "histories" / "native-tools-planner.json"
WORKFLOW_ID = "run_native@recorded"
DEFINITIONS = [WorkflowDefinition(id="native")]
OWN = "/mnt/scratch/own"


def _edit(command: str, **arguments: Any) -> Any:
    return tool("str_replace_based_edit_tool", command=command, **arguments)


def _memory(command: str, **arguments: Any) -> Any:
    return tool("memory", command=command, **arguments)


STEPS = [
    _edit("create", path=f"{OWN}/plan.md", file_text="one\ntwo\n"),
    _edit("str_replace", path=f"{OWN}/plan.md", old_str="two", new_str="TWO"),
    _edit("view", path=f"{OWN}/plan.md"),
    _edit("create", path="/mnt/memory/workflow/lesson.md", file_text="learned\n"),
    _memory("create", path="/memories/workflow/notes.md", file_text="alpha\n"),
    _memory("str_replace", path="/memories/workflow/notes.md", old_str="alpha", new_str="beta"),
    _memory("view", path="/memories/workflow"),
    _memory("view", path="/memories/nope.md"),  # an error result replays too
    tool("bash", command=f"cat {OWN}/plan.md /mnt/memory/workflow/notes.md"),
    tool("finish", summary="edited"),
]


@pytest.mark.skipif(
    os.environ.get("LW_RECORD_HISTORIES") != "1",
    reason="set LW_RECORD_HISTORIES=1 to re-record tests/histories/",
)
async def test_record_the_native_tools_history(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    standin, model = scripted_claude("native", STEPS)
    clear = PrivacyOptions(encrypt=False)  # readable fixture, replays without a key
    async with lw_worker(dev_env, data_dir, task_queue, DEFINITIONS, model, privacy=clear) as c:
        result = await c.execute_workflow(
            "lw.Planner", AgentInput(task="Edit."), id=WORKFLOW_ID, task_queue=task_queue,
            result_type=AgentResult,
        )  # fmt: skip
        history = await c.get_workflow_handle(WORKFLOW_ID).fetch_history()
    assert standin.violations == [] and result.summary == "edited"
    types = {
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    }
    assert {"lw.edit", "lw.memory.tool", "lw.bash"} <= types, types
    HISTORY.write_text(json.dumps(json.loads(history.to_json()), indent=1) + "\n")


async def test_the_native_tools_history_replays(tmp_path: Path) -> None:
    history = WorkflowHistory.from_json(WORKFLOW_ID, HISTORY.read_text(encoding="utf-8"))
    replayer = Replayer(workflows=[], plugins=[LittleWorkflowPlugin(tmp_path, DEFINITIONS)])
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure
