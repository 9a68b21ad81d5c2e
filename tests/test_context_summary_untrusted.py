"""The summary a model writes when its turns are compacted is untrusted input like any
reply: one carrying a lone surrogate (valid JSON, which the SDK decodes into a str no
UTF-8 encoder takes) is kept with U+FFFD in its place, and the session goes on, instead
of ``lw.model`` failing on it at every retry (each one paying for the summary again)."""

from __future__ import annotations

from pathlib import Path

import httpx2
from temporalio.testing import WorkflowEnvironment

from lw_temporal import (
    AgentInput,
    AgentResult,
    ModelRequest,
    ModelResponse,
    WorkflowDefinition,
)
from lw_temporal._agent._compaction import COMPACT_NOTE
from lw_temporal.ids import AgentId
from lw_temporal.models import AnthropicModel
from lw_temporal.options import ModelCallOptions
from lw_temporal.testing import running_worker

from ._prompt_cache import CachingStandIn, session_brain

TURNS = 30
MARK = "LONE-SURROGATE"


class _Escaping(CachingStandIn):
    """Answers carry ``\\ud800`` where the brain wrote MARK."""

    async def handle(self, request: httpx2.Request) -> httpx2.Response:
        answer = await super().handle(request)
        headers = {k: v for k, v in answer.headers.items() if k.lower() != "content-length"}
        body = answer.content.replace(MARK.encode(), b"\\ud800")
        return httpx2.Response(answer.status_code, headers=headers, content=body)


async def test_a_summary_with_a_lone_surrogate_is_kept_cleaned(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    printing = session_brain(TURNS, 4096)

    async def brain(request: ModelRequest) -> ModelResponse:
        reply = await printing(request)
        if request.summarize:
            return reply.model_copy(update={"text": f"{MARK} {reply.text}"})
        return reply

    standin = _Escaping(brain)
    model = AnthropicModel(client=standin.client(), model="claude-sonnet-4-6")
    run = AgentId.planner("summed", task_queue)
    async with running_worker(
        dev_env.client, data_dir=data_dir,
        definitions=[WorkflowDefinition(id="summed", max_turns=TURNS + 10)], model=model,
        task_queue=task_queue, model_calls=ModelCallOptions(context_budget_tokens=5_000),
    ) as client:  # fmt: skip
        result = await client.execute_workflow(
            "lw.Planner", AgentInput(task="Print one block per turn, then finish."),
            id=str(run), task_queue=task_queue, result_type=AgentResult,
        )  # fmt: skip
    assert standin.violations == []
    assert result.summary == f"printed {TURNS} blocks"
    asked = [b for b in standin.requests if COMPACT_NOTE in str(b["messages"][-1]["content"])]
    assert asked, "nothing was compacted"
    # Each summary was asked for once, and read back with the mark replaced.
    opening = [b["messages"][0]["content"] for b in standin.requests]
    shown = [blocks[1]["text"] for blocks in opening if len(blocks) > 1]
    assert shown and all("\ufffd Summary: printed blocks" in text for text in shown)
    assert len(standin.requests) == TURNS + 1 + len(asked)
