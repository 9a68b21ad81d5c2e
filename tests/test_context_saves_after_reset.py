"""What lw saved in the agent's scratch for a turn a reset abandoned is not handed to
the new branch: saves are written once (an existing name kept) and named by turn and
call, so after a reset (or a workflow-level retry) to before a turn, the new branch's
result of that turn, cut to fit the budget, pointed at the file holding the abandoned
branch's output, and a compaction of the same turns at its transcript. The model was
asked again (the turn files are dropped) but re-read the branch it left."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentResult, ModelRequest, ModelResponse, ToolCall, WorkflowDefinition
from lw_temporal.ids import AgentId, DataLayout
from lw_temporal.options import ModelCallOptions
from lw_temporal.testing import running_worker

from ._reset_support import reset

AGENT_UID = 54_321  # not the worker's: a file the agent made
asks: list[str] = []
told: list[str] = []


class Brain:
    async def next_turn(self, request: ModelRequest) -> ModelResponse:
        return _reply(request)


def _reply(request: ModelRequest) -> ModelResponse:
    if not request.history:
        tag = "old" if not asks else "new"
        asks.append(tag)
        # about 50 KB, over this budget: cut, and saved whole in context-cleared/
        command = f"seq -w 1 7000 | sed 's/^/{tag} /'"
        return ModelResponse(tool_calls=[ToolCall(name="bash", arguments={"command": command})])
    told.append(request.history[-1].results[0].text)
    return ModelResponse(tool_calls=[ToolCall(name="finish", arguments={"summary": "done"})])


async def test_a_reset_branch_reads_its_own_saved_results(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    run = AgentId.planner("saves", task_queue)
    async with running_worker(
        dev_env.client, data_dir=data_dir, definitions=[WorkflowDefinition(id="saves")],
        model=Brain(), task_queue=task_queue,
        model_calls=ModelCallOptions(context_budget_tokens=6_000),
    ) as client:  # fmt: skip
        handle = await client.start_workflow(
            "lw.Planner", "Read.", id=str(run), task_queue=task_queue, result_type=AgentResult
        )
        assert (await handle.result()).summary == "done"
        events = (await handle.fetch_history()).events
        completed = [
            e.event_id
            for e in events
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
        ]
        scratch = DataLayout.at(data_dir).scratch(run)
        transcript = scratch / "context-compacted" / "turns-1-1.md"  # one lw saved
        transcript.parent.mkdir()
        transcript.write_text("old turns\n")
        agents = scratch / "context-cleared" / "turn-1-mine.txt"  # the agent's own
        agents.write_text("kept\n")
        os.chown(agents, AGENT_UID, AGENT_UID)
        again = await reset(client, handle, completed[0])
        result = await asyncio.wait_for(
            client.get_workflow_handle(str(run), run_id=again, result_type=AgentResult).result(),
            60,
        )
    assert result.summary == "done" and asks == ["old", "new"]
    old, new = told
    assert "old 0001\n" in old and "new 0001\n" in new, new[:80]
    assert "[cut to fit the context budget" in new, new[-300:]
    where = new.rsplit(" are in ", 1)[1].split(":", 1)[0]
    saved = (scratch / where.removeprefix("/mnt/scratch/own/")).read_text()
    assert "new 3500\n" in saved and "old" not in saved, saved[:80]
    assert not transcript.exists() and agents.read_text() == "kept\n"
