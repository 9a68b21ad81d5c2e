"""A name longer than a filesystem takes (255 bytes) is a result the model can act on,
for every command of both native file tools: the text editor's commands and the memory
tool's ``view``/``rename``/``delete`` raised ``OSError: [Errno 36] File name too long``
out of the activity, which was retried five times (half a minute of back-off) before
the model was told a raw ``OSError``."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from temporalio.testing import ActivityEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._edit._records import (
    EditorRequest,
    MemoryToolRequest,
    NativeRequest,
    ToolOutcome,
)

PLANNER = "run_longname@1"
LONG = "a" * 300
WIDE = "é" * 200  # 400 bytes in 200 characters
M = "/memories/workflow"
S = "/mnt/scratch/own"


async def _run(
    plugin: LittleWorkflowPlugin, activity_id: str, request: NativeRequest
) -> ToolOutcome:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info, workflow_id=PLANNER, workflow_type="lw.Planner", activity_id=activity_id
    )
    tools = plugin.edit_activities
    if isinstance(request, MemoryToolRequest):
        return await env.run(tools.memory_tool, request)
    assert isinstance(request, EditorRequest)
    return await env.run(tools.edit, request)


async def test_an_overlong_name_is_refused_as_a_result(data_dir: Path) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="longname")])
    plugin.config.callers.enabled = False  # called directly, not from a workflow
    made = await _run(plugin, "ok", MemoryToolRequest(command="create", path=f"{M}/ok.md",
                                                       file_text="x\n"))  # fmt: skip
    assert not made.is_error, made.text
    requests: list[NativeRequest] = [
        MemoryToolRequest(command="create", path=f"{M}/{LONG}", file_text="x"),
        MemoryToolRequest(command="view", path=f"{M}/{LONG}/x.md"),
        MemoryToolRequest(command="rename", old_path=f"{M}/ok.md", new_path=f"{M}/{LONG}"),
        MemoryToolRequest(command="delete", path=f"{M}/{LONG}"),
        EditorRequest(command="create", path=f"{S}/{LONG}", file_text="x"),
        EditorRequest(command="create", path=f"{S}/{LONG}/x.txt", file_text="x"),
        EditorRequest(command="create", path=f"{S}/{WIDE}", file_text="x"),
        EditorRequest(command="view", path=f"{S}/{LONG}"),
        EditorRequest(command="str_replace", path=f"{S}/{LONG}", old_str="a", new_str="b"),
        EditorRequest(command="insert", path=f"{S}/{LONG}", insert_line=0, insert_text="b"),
        EditorRequest(command="view", path=f"{M}/{LONG}"),
    ]
    for index, request in enumerate(requests):
        outcome = await _run(plugin, f"long-{index}", request)
        assert outcome.is_error and "at most 255 bytes" in outcome.text, (request, outcome)
    # a name of exactly 255 bytes is an ordinary one
    edge = EditorRequest(command="create", path=f"{S}/{'b' * 255}", file_text="x")
    outcome = await _run(plugin, "edge", edge)
    assert not outcome.is_error, outcome.text
