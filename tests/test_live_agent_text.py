"""The live tree (what ``lw-temporal run`` and ``status`` draw) shows a running agent's
latest model text and the newest output of the command it is running, while the
command runs and before any of that output is in the workflow history (it comes from
the activity's heartbeat details); agent-written text reaches the terminal escaped."""

from __future__ import annotations

import asyncio
from pathlib import Path

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentResult, ModelRequest, ModelResponse, ToolCall, WorkflowDefinition
from lw_temporal._live import Node, Screen, fetch_tree
from lw_temporal.ids import AgentId, DataLayout

from ._hierarchy_support import lw_worker

WAITER = WorkflowDefinition(id="waiter")
SAID = "Waiting for the go signal \x1b[2J\x1b]0;owned\x07 now."
WAIT = "echo started-waiting; while [ ! -e go ]; do sleep 0.1; done; echo released"


class Waiter:
    """Says something with escape sequences in it, runs a command that waits for a
    file the test creates, then finishes."""

    async def next_turn(self, request: ModelRequest) -> ModelResponse:
        if request.turn == 0:
            call = ToolCall(name="bash", arguments={"command": WAIT})
            return ModelResponse(text=SAID, tool_calls=[call], stop_reason="tool_use")
        return ModelResponse(tool_calls=[ToolCall(name="finish", arguments={"summary": "ok"})])


async def _while_running(client: Client, root: str) -> Node:
    """The root's node once its command's first output is visible."""
    for _ in range(600):
        nodes = await fetch_tree(client, root)
        if nodes and "started-waiting" in nodes[0].output:
            return nodes[0]
        await asyncio.sleep(0.1)
    raise AssertionError("the running command's output never showed")


def _release(scratch: Path) -> None:
    (scratch / "go").write_text("")


async def test_the_tree_shows_what_the_agent_says_and_its_command_prints(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    run = AgentId.planner("waiter", task_queue)
    async with lw_worker(dev_env, data_dir, task_queue, [WAITER], Waiter()) as client:
        handle = await client.start_workflow(
            "lw.Planner", "wait", id=str(run), task_queue=task_queue, result_type=AgentResult
        )
        node = await _while_running(client, str(run))
        history = (await handle.fetch_history()).to_json()
        await asyncio.to_thread(_release, DataLayout.at(data_dir).scratch(run))
        result = await handle.result()

    assert result.summary == "ok"
    # The output came from the running activity, not from the history.
    assert "started-waiting" not in history
    lines = [node.line(), *node.details(output=True)]
    assert "bash" in lines[0]
    shown = "\n".join(lines)
    assert "says: Waiting for the go signal \\x1b[2J\\x1b]0;owned\\x07 now." in shown
    assert lines[-1].strip() == "| started-waiting"
    assert "\x1b" not in shown and "\x07" not in shown
    # Piped, the tree is plain lines: the text, not the command's output.
    printed: list[str] = []
    Screen(printed.append, live=False).show([node])
    assert "says: " in printed[0] and "started-waiting" not in printed[0]
