"""History growth per turn: lw's agent loop against a loop that re-sends the whole
conversation to its model activity each turn (the shape of Temporal's OpenAI Agents
integration, whose users hit the history limit: sdk-python#1890).

Both run the same agent on the same dev server in the same run: ``--turns`` turns (200)
whose every turn runs one bash command printing ``--output`` bytes (2.5 KB), then a
finish. For each, the history bytes added by turns 10, 100 and 200 (the serialized
events from one model call to the next, continue-as-new runs followed) and the tokens
the model is sent at that turn (request bytes / 4). lw sends the model the same whole
conversation; its history grows only by what is new in the turn.

Pass criteria printed at the end: lw's late turns add at most 1.3x what early ones add,
and each adds at most twice the turn's new tool output plus 2 KiB.

    python benchmarks/history.py [--turns 200] [--output 2560]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from lw_temporal import (
    AgentInput,
    AgentResult,
    LittleWorkflowPlugin,
    Model,
    ModelRequest,
    ModelResponse,
    ToolCall,
    WorkflowDefinition,
)
from lw_temporal.ids import AgentId
from lw_temporal.models import AnthropicModel
from lw_temporal.testing import dev_environment

MARKS = (10, 100, 200)
SLACK = 2048


def command(turn: int, size: int) -> str:
    """Prints ``size`` bytes naming the turn (distinct output every turn)."""
    line = f"turn {turn:04d} " + "x" * 53 + "\n"  # 64 bytes
    return f"for i in $(seq 1 {size // 64}); do printf '%s' '{line[:-1]}'; echo; done"


# -- lw ------------------------------------------------------------------------------
class LoudAgent:
    """Turn n runs command(n); after the last turn it finishes. Measures what the
    model is sent: the Anthropic adapter's request body for the same conversation."""

    def __init__(self, turns: int, size: int) -> None:
        self.turns, self.size = turns, size
        self.sent: dict[int, int] = {}
        self.shaper = AnthropicModel.__new__(AnthropicModel)
        self.shaper.model, self.shaper.max_tokens = "claude-sonnet-4-6", 8192
        self.shaper.prompt_caching, self.shaper.request_options = True, {}
        self.shaper.native_tools = True

    async def next_turn(self, request: ModelRequest) -> ModelResponse:
        body = json.dumps(self.shaper.params(request))
        self.sent[request.turn + 1] = len(body.encode())
        if request.turn < self.turns:
            call = ToolCall(
                name="bash", arguments={"command": command(request.turn + 1, self.size)}
            )
        else:
            call = ToolCall(name="finish", arguments={"summary": "done"})
        return ModelResponse(text="", tool_calls=[call], stop_reason="tool_use")


# -- the re-send-everything baseline -----------------------------------------------------
class Conversation(BaseModel):
    messages: list[dict[str, str]]


class Reply(BaseModel):
    command: str | None


@activity.defn(name="bench.model")
async def bench_model(conversation: Conversation) -> Reply:
    meta = json.loads(conversation.messages[0]["content"])
    turn = sum(1 for m in conversation.messages if m["role"] == "assistant") + 1
    if turn > meta["turns"]:
        return Reply(command=None)
    return Reply(command=command(turn, meta["size"]))


@activity.defn(name="bench.bash")
async def bench_bash(line: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        "bash", "-c", line, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    return out.decode()


@workflow.defn(name="bench.ResendAll")
class ResendAll:
    """Each turn sends the whole conversation to the model activity, as the
    openai_agents integration's model activity input does."""

    @workflow.run
    async def run(self, setup: Conversation) -> int:
        conversation = setup
        while True:
            reply = await workflow.execute_activity(
                bench_model, conversation, start_to_close_timeout=timedelta(seconds=60)
            )
            if reply.command is None:
                return len(conversation.messages)
            output = await workflow.execute_activity(
                bench_bash, reply.command, start_to_close_timeout=timedelta(seconds=60)
            )
            conversation.messages += [
                {"role": "assistant", "content": json.dumps({"tool_calls": [reply.command]})},
                {"role": "tool", "content": output},
            ]


# -- measuring -----------------------------------------------------------------------
async def _chain(client: Client, workflow_id: str) -> list[HistoryEvent]:
    """Every event of a workflow's continue-as-new chain, oldest first."""
    events: list[HistoryEvent] = []
    run_id: str | None = None
    handle = client.get_workflow_handle(workflow_id)
    first = (await handle.fetch_history()).events[0]
    run_id = first.workflow_execution_started_event_attributes.first_execution_run_id
    while run_id:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        events += history.events
        last = history.events[-1]
        run_id = (
            last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
            if last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
            else None
        )
    return events


def _is_model_call(event: HistoryEvent, model_activity: str) -> bool:
    if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        return event.activity_task_scheduled_event_attributes.activity_type.name == model_activity
    return False


def per_turn(events: Sequence[HistoryEvent], model_activity: str) -> dict[int, int]:
    """Bytes of the events from each model call up to the next (turn n = n-th call)."""
    starts = [i for i, e in enumerate(events) if _is_model_call(e, model_activity)]
    sizes = [e.ByteSize() for e in events]
    bounds = [*starts, len(events)]
    return {n + 1: sum(sizes[bounds[n] : bounds[n + 1]]) for n in range(len(starts))}


@dataclass
class Row:
    name: str
    added: dict[int, int]
    sent: dict[int, int]
    total: int
    ended: str = ""


async def run_lw(env: WorkflowEnvironment, turns: int, size: int) -> Row:
    with tempfile.TemporaryDirectory() as data:
        agent = LoudAgent(turns, size)
        definition = WorkflowDefinition(id="loud", max_turns=turns + 5)
        model: Model = agent
        plugin = LittleWorkflowPlugin(Path(data), [definition], model=model)
        config = env.client.config()
        config["plugins"] = [plugin]
        client = Client(**config)
        queue = f"bench-{uuid.uuid4().hex[:8]}"
        run = AgentId.planner("loud", queue)
        async with Worker(client, task_queue=queue):
            result = await client.execute_workflow(
                "lw.Planner",
                AgentInput(task="print"),
                id=str(run),
                task_queue=queue,
                result_type=AgentResult,
            )
        assert result.summary == "done", result
        events = await _chain(client, str(run))
    return Row("lw", per_turn(events, "lw.model"), agent.sent, sum(e.ByteSize() for e in events))


async def run_resend(env: WorkflowEnvironment, turns: int, size: int) -> Row:
    config = env.client.config()
    config["data_converter"] = pydantic_data_converter
    client = Client(**config)
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    meta = json.dumps({"turns": turns, "size": size})
    setup = Conversation(messages=[{"role": "user", "content": meta}])
    workflow_id = f"resend-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client,
        task_queue=queue,
        workflows=[ResendAll],
        activities=[bench_model, bench_bash],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        try:
            await client.execute_workflow(ResendAll.run, setup, id=workflow_id, task_queue=queue)
            ended = ""
        except WorkflowFailureError as err:
            # What openai_agents users report: the server ends the run at its limit.
            ended = f"{err.cause or err}"
    events = await _chain(client, workflow_id)
    added = per_turn(events, "bench.model")
    sent: dict[int, int] = {}
    for event in events:
        if _is_model_call(event, "bench.model"):
            payload = event.activity_task_scheduled_event_attributes.input.payloads[0]
            sent[len(sent) + 1] = len(payload.data)
    return Row("resend-all", added, sent, sum(e.ByteSize() for e in events), ended)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--output", type=int, default=2560, help="bytes printed per turn")
    args = parser.parse_args()
    marks = [m for m in MARKS if m <= args.turns] or [args.turns]
    async with dev_environment() as env:
        rows = [
            await run_lw(env, args.turns, args.output),
            await run_resend(env, args.turns, args.output),
        ]
    print(f"{args.turns} turns, each printing {args.output} bytes")
    print("history bytes added by turn " + ", ".join(map(str, marks)) + "; tokens sent (bytes/4)")
    for row in rows:
        added = "  ".join(
            f"t{m}: {row.added[m]:>9,}" if m in row.added else f"t{m}: {'-':>9}" for m in marks
        )
        sent = "  ".join(
            f"t{m}: {row.sent[m] // 4:>8,}" if m in row.sent else f"t{m}: {'-':>8}" for m in marks
        )
        print(f"  {row.name:<11} added  {added}   total {row.total:,} bytes")
        print(f"  {'':<11} tokens {sent}")
        if row.ended:
            print(f"  {'':<11} ended after {len(row.added)} turns: {row.ended}")
    lw, resend = rows
    early, late = lw.added[marks[0]], lw.added[marks[-1]]
    bound = 2 * args.output + SLACK
    worst = max(lw.added[t] for t in range(1, args.turns + 1))
    print(f"lw late/early: {late / early:.2f}x (<= 1.3 required)")
    print(f"lw worst turn: {worst:,} bytes (<= 2 x {args.output} + {SLACK} = {bound:,} required)")
    reached = max(resend.added)
    print(
        f"resend-all turn {reached}/turn {marks[0]}: "
        f"{resend.added[reached] / resend.added[marks[0]]:.1f}x; its history is "
        f"{resend.total / lw.total:.1f}x lw's"
    )
    ok = late <= 1.3 * early and worst <= bound
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
