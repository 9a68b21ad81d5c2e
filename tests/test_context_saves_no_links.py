"""What the worker saves in an agent's scratch for its context (cleared results in
``context-cleared/``, compacted turns in ``context-compacted/``) never goes through a
link the agent planted: an agent that points those folders at a host folder with bash,
then runs a session long enough to be cleared and compacted, gets nothing written
there. The session still completes, and the notes of its cleared results say they
could not be saved instead of naming a file that is not one."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import (
    AgentInput,
    AgentResult,
    ModelRequest,
    ModelResponse,
    ToolCall,
    WorkflowDefinition,
)
from lw_temporal._agent._compaction import COMPACT_NOTE, COMPACTED_FOLDER
from lw_temporal.ids import AgentId
from lw_temporal.models import AnthropicModel
from lw_temporal.options import ModelCallOptions
from lw_temporal.testing import running_worker

from ._prompt_cache import CachingStandIn, session_brain

TURNS = 40
BUDGET = 5_000


async def test_cleared_and_compacted_saves_do_not_follow_planted_links(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str, tmp_path: Path
) -> None:
    outside = tmp_path / "outside-the-sandbox"
    outside.mkdir()
    planted = (
        f"ln -s {outside} /mnt/scratch/own/context-cleared && "
        f"ln -s {outside} /mnt/scratch/own/{COMPACTED_FOLDER} && echo planted"
    )
    printing = session_brain(TURNS, 4096)

    async def brain(request: ModelRequest) -> ModelResponse:
        if not request.history and not request.summary:
            return ModelResponse(tool_calls=[ToolCall(name="bash", arguments={"command": planted})])
        return await printing(request)

    standin = CachingStandIn(brain)
    model = AnthropicModel(client=standin.client(), model="claude-sonnet-4-6")
    run = AgentId.planner("linked", task_queue)
    async with running_worker(
        dev_env.client, data_dir=data_dir,
        definitions=[WorkflowDefinition(id="linked", max_turns=TURNS + 10)], model=model,
        task_queue=task_queue, model_calls=ModelCallOptions(context_budget_tokens=BUDGET),
    ) as client:  # fmt: skip
        result = await client.execute_workflow(
            "lw.Planner", AgentInput(task="Print one block per turn, then finish."),
            id=str(run), task_queue=task_queue, result_type=AgentResult,
        )  # fmt: skip
    assert standin.violations == []
    assert result.summary == f"printed {TURNS} blocks"
    first = standin.requests[1]["messages"]
    assert "stdout:\nplanted" in first[2]["content"][0]["content"], first[2]
    bodies = [str(body["messages"]) for body in standin.requests]
    assert any("[cleared to fit" in body for body in bodies), "nothing was cleared"
    assert any(COMPACT_NOTE in body for body in bodies), "nothing was compacted"
    # Nothing landed where the links point, and no note names a file behind them.
    assert sorted(p.name for p in outside.iterdir()) == []
    assert not any("saved in /mnt/scratch/own/context-cleared/" in body for body in bodies)
    assert any("could not be saved" in body for body in bodies)
