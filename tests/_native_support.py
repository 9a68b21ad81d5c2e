"""Shared by the native tool tests: one scripted agent per step list, driven through
the strict Anthropic stand-in, and the check of each call's result."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from temporalio.testing import ActivityEnvironment

from lw_temporal import LittleWorkflowPlugin, Role, ToolCall
from lw_temporal._edit._records import EditorRequest, ToolOutcome
from lw_temporal.models import AnthropicModel
from lw_temporal.testing import ScriptedModel

from ._provider_standins import AnthropicStandIn


def scripted_claude(
    definition: str, steps: Sequence[ToolCall]
) -> tuple[AnthropicStandIn, AnthropicModel]:
    """A planner of ``definition`` making one call per turn, as Claude through the SDK."""
    script = ScriptedModel({(definition, Role.PLANNER): [[step] for step in steps]})
    standin = AnthropicStandIn(script.next_turn)
    return standin, AnthropicModel(client=standin.client(), model="claude-sonnet-4-6")


def answers(body: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """(tool name, result text, is_error) of every call of a request, in order."""
    names = {
        b["id"]: b["name"]
        for m in body["messages"]
        for b in m["content"]
        if b["type"] == "tool_use"
    }
    return [
        (names[b["tool_use_id"]], b["content"], b["is_error"])
        for m in body["messages"]
        for b in m["content"]
        if b["type"] == "tool_result"
    ]


def check_answers(
    body: dict[str, Any], steps: Sequence[ToolCall], expected: Sequence[tuple[str, bool]]
) -> None:
    """Each step was answered, in order, with a result starting as expected."""
    got = answers(body)
    assert len(got) == len(expected)
    for (name, text, error), step, (start, is_error) in zip(got, steps, expected, strict=True):
        assert name == step.name
        assert text.startswith(start), (step.arguments, text)
        assert error is is_error, (step.arguments, text)


async def planner_edit(
    plugin: LittleWorkflowPlugin, planner: str, activity_id: str, attempt: int, **arguments: Any
) -> ToolOutcome:
    """One text editor call of ``planner``, as its ``attempt`` of activity
    ``activity_id`` (run directly, outside a workflow)."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info, workflow_id=planner, workflow_type="lw.Planner", activity_id=activity_id,
        attempt=attempt,
    )  # fmt: skip
    return await env.run(plugin.edit_activities.edit, EditorRequest(**arguments))
