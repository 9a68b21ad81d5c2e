"""The memory tools run from the agent loop as the ``lw.memory.*`` activities: results
come back as readable text, reads are bounded by default, and a refused mutation is a
tool error the model sees (the run goes on), not a failed workflow."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, ModelRequest, Role, ToolCall, WorkflowDefinition
from lw_temporal._agent._tools import MEMORY_READ_BYTES as MEMORY_TEXT_CAP
from lw_temporal.ids import AgentId, DataLayout
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import lw_worker

NOTES = WorkflowDefinition(id="notes")
BIG = "line of lessons\n" * 5000  # 80 000 bytes
WF = "/mnt/memory/workflow"


def _report(request: ModelRequest) -> list[ToolCall]:
    entries = request.last_results()
    return [tool("finish", summary="\n=====\n".join(f"{e.ok} {e.text}" for e in entries))]


MODEL = ScriptedModel(
    {
        ("notes", Role.PLANNER): [
            [
                tool("memory_write", path=f"{WF}/lessons.md", content="first\n"),
                tool("memory_append", path=f"{WF}/lessons.md", content="second\n"),
                tool("memory_replace", path=f"{WF}/lessons.md", old="first", new="1st"),
                tool("memory_read", path=f"{WF}/lessons.md"),
                tool("memory_write", path=f"{WF}/big.md", content=BIG),
                tool("memory_read", path=f"{WF}/big.md"),
                tool("memory_list", path=WF),
                tool("memory_delete", path=f"{WF}/big.md"),
                tool("memory_write", path="/mnt/memory/org/policy.md", content="x"),
                tool("no_such_tool"),
                tool("memory_write", path=f"{WF}/no-content.md"),
                tool("memory_read", path=f"{WF}/lessons.md", colour="blue"),
            ],
            _report,
        ]
    }
)


async def test_memory_tools_from_the_loop(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    run = AgentId.planner("notes", task_queue)
    async with lw_worker(dev_env, data_dir, task_queue, [NOTES], MODEL) as client:
        result = await client.execute_workflow(
            "lw.Planner",
            AgentInput(),
            id=str(run),
            task_queue=task_queue,
            result_type=AgentResult,
        )
    outcomes = result.summary.split("\n=====\n")
    assert len(outcomes) == 12
    read_small, read_big, listing = outcomes[3], outcomes[5], outcomes[6]
    assert read_small.startswith("True ") and read_small.endswith("\n1st\nsecond\n")
    # A big file is read in a bounded slice, and the model is told how to go on.
    assert read_big.startswith("True ") and f"offset={MEMORY_TEXT_CAP}" in read_big
    assert len(read_big.encode()) <= MEMORY_TEXT_CAP + 256
    assert "lessons.md (file" in listing and "big.md (file" in listing
    assert outcomes[7].startswith("True ")
    # Org memory is read-only for a planner by default: a typed refusal, as text.
    assert outcomes[8].startswith("False LwMemoryReadOnly"), outcomes[8]
    assert outcomes[9].startswith("False unknown tool 'no_such_tool'"), outcomes[9]
    # Malformed arguments are refused by the loop before any activity is scheduled.
    assert outcomes[10].startswith("False memory_write: invalid arguments"), outcomes[10]
    assert "content" in outcomes[10]
    assert outcomes[11].startswith("False memory_read: invalid arguments"), outcomes[11]
    assert "colour" in outcomes[11]

    history = await client.get_workflow_handle(str(run)).fetch_history()
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    # lessons.md, big.md and the refused org write; never the malformed no-content.md
    assert scheduled.count("lw.memory.write") == 3
    assert scheduled.count("lw.memory.read") == 2

    store = DataLayout.at(data_dir).workflow_memory("notes")
    assert (store / "lessons.md").read_text() == "1st\nsecond\n"
    assert not (store / "big.md").exists()
    assert not DataLayout.at(data_dir).org_memory.exists()
