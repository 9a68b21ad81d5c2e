"""A memory tool's change held in quarantine says so to the model: the tainted run's
``memory_append`` result reads "held in quarantine" (as a bash command's held changes
do in its ``lw.bash:`` line), where it read like a write to the store; an untainted
run's result is what it was.

Real dev server, real worker."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, ModelRequest, Role, ToolCall, WorkflowDefinition
from lw_temporal.ids import AgentId
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import lw_worker
from ._taint_support import WF

NOTES = WorkflowDefinition(id="notes")


def _said(request: ModelRequest) -> list[ToolCall]:
    [result] = request.last_results()
    return [tool("finish", summary=result.text)]


async def test_a_held_memory_tool_change_says_held(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    append = [tool("memory_append", path=f"{WF}/lessons.md", content="a lesson\n")]
    model = ScriptedModel({("notes", Role.PLANNER): [append, _said]})
    said = {}
    async with lw_worker(dev_env, data_dir, task_queue, [NOTES], model) as client:
        for token, untrusted in (("tainted", True), ("clean", False)):
            result: AgentResult = await client.execute_workflow(
                "lw.Planner", AgentInput(task="note it", untrusted=untrusted),
                id=str(AgentId.planner("notes", f"{task_queue}-{token}")),
                task_queue=task_queue, result_type=AgentResult,
            )  # fmt: skip
            said[token] = result.summary
    assert said["tainted"].startswith("append /mnt/memory/workflow/lessons.md: 9 bytes")
    assert "held in quarantine" in said["tainted"], said
    assert "quarantine" not in said["clean"], said
