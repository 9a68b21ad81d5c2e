"""Anthropic's documented prompt-cache rules, applied to the Messages API requests the
real ``AnthropicModel`` sends through the real SDK (a loopback stand-in: the strict
``AnthropicStandIn`` plus this accounting).

The rules, as the prompt-caching documentation states them:

- the prompt is a prefix in the order tools, system, messages; each tool, system block
  and message content block is one block;
- a ``cache_control`` breakpoint (at most four per request) caches the prefix ending
  at its block, once that prefix is at least the model's minimum cacheable length
  (1024 tokens for Sonnet and Opus);
- at each breakpoint the cache is looked up at that block and, going back, at up to 20
  block boundaries before it; a hit is an entry written by an earlier request for
  exactly that prefix;
- tokens read from the cache cost 0.1x the input price, tokens written 1.25x, the rest
  1x (the 5-minute lifetime never runs out on a loopback).

The ideal is a perfect cache over the same requests: every prefix any earlier request
sent is read (0.1x) and everything else written once (1.25x).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client

from lw_temporal import (
    AgentInput,
    AgentResult,
    ModelRequest,
    ModelResponse,
    ToolCall,
    WorkflowDefinition,
)
from lw_temporal._agent._compaction import COMPACT_NOTE
from lw_temporal.ids import AgentId
from lw_temporal.models import AnthropicModel
from lw_temporal.options import ModelCallOptions
from lw_temporal.testing import running_worker

from ._provider_standins import AnthropicStandIn, Brain

MIN_CACHEABLE_TOKENS = 1024
LOOKBACK_BLOCKS = 20
MAX_BREAKPOINTS = 4
READ_PRICE, WRITE_PRICE = 0.1, 1.25
BYTES_PER_TOKEN = 4


@dataclass
class CacheTotals:
    """What the requests of a run cost under the cache rules."""

    requests: int = 0
    input_tokens: int = 0
    read_tokens: int = 0
    written_tokens: int = 0
    cost: float = 0.0
    ideal_cost: float = 0.0
    largest_request: int = 0

    @property
    def hit_fraction(self) -> float:
        return self.read_tokens / self.input_tokens if self.input_tokens else 0.0

    @property
    def cost_ratio(self) -> float:
        return self.cost / self.ideal_cost if self.ideal_cost else 0.0

    def line(self) -> str:
        return (
            f"{self.requests} requests, {self.input_tokens} input tokens, "
            f"{self.hit_fraction:.1%} read from cache, cost {self.cost_ratio:.2f}x the "
            f"ideal, largest request {self.largest_request} tokens"
        )


@dataclass
class PromptCache:
    """The cache entries a series of requests leaves, and what each request costs."""

    totals: CacheTotals = field(default_factory=CacheTotals)
    entries: set[str] = field(default_factory=set)
    #: Every prefix any request sent (a perfect cache has them all).
    seen: set[str] = field(default_factory=set)
    #: Per request: (input, read, written) tokens.
    log: list[tuple[int, int, int]] = field(default_factory=list)

    def account(self, body: dict[str, Any]) -> tuple[int, int, int]:
        """Apply the rules to one request body: (uncached, read, written) tokens."""
        blocks = _blocks(body)
        if sum(b[1] for b in blocks) > MAX_BREAKPOINTS:
            raise ValueError("more than four cache_control breakpoints")
        hashes: list[str] = []
        ends: list[int] = []
        running = hashlib.sha256()
        total = 0
        for text, _mark, tokens in blocks:
            running.update(text.encode())
            hashes.append(running.copy().hexdigest())
            total += tokens
            ends.append(total)
        marks = [i for i, (_t, mark, _n) in enumerate(blocks) if mark]
        read_at = -1
        for mark in marks:
            for back in range(LOOKBACK_BLOCKS):
                at = mark - back
                if at < 0:
                    break
                if hashes[at] in self.entries and at > read_at:
                    read_at = at
                    break
        read = ends[read_at] if read_at >= 0 else 0
        written_to = read
        for mark in marks:
            if ends[mark] >= MIN_CACHEABLE_TOKENS:
                self.entries.add(hashes[mark])
                written_to = max(written_to, ends[mark])
        written = written_to - read
        uncached = total - read - written
        ideal_at = max((i for i, h in enumerate(hashes) if h in self.seen), default=-1)
        ideal_read = ends[ideal_at] if ideal_at >= 0 else 0
        self.seen.update(hashes)
        t = self.totals
        t.requests += 1
        t.input_tokens += total
        t.read_tokens += read
        t.written_tokens += written
        t.cost += READ_PRICE * read + WRITE_PRICE * written + uncached
        t.ideal_cost += READ_PRICE * ideal_read + WRITE_PRICE * (total - ideal_read)
        t.largest_request = max(t.largest_request, total)
        self.log.append((total, read, written))
        return uncached, read, written


def _blocks(body: dict[str, Any]) -> list[tuple[str, bool, int]]:
    """The prompt's blocks in cache order: (canonical text, has a breakpoint, tokens)."""
    out: list[tuple[str, bool, int]] = []

    def add(kind: str, block: dict[str, Any]) -> None:
        bare = {k: v for k, v in block.items() if k != "cache_control"}
        text = kind + json.dumps(bare, sort_keys=True, ensure_ascii=False)
        out.append((text, "cache_control" in block, math.ceil(len(text) / BYTES_PER_TOKEN)))

    for tool in body.get("tools", []):
        add("tool:", tool)
    system = body.get("system", [])
    for block in [{"type": "text", "text": system}] if isinstance(system, str) else system:
        add("system:", block)
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for block in content:
            add(f"{message['role']}:", block)
    return out


class CachingStandIn(AnthropicStandIn):
    """The strict Anthropic stand-in that also keeps the cache and reports its usage
    in each answer, as the API does (``cache_read_input_tokens``...)."""

    def __init__(self, brain: Brain) -> None:
        super().__init__(brain)
        self.cache = PromptCache()

    def answer(self, response: ModelResponse) -> dict[str, Any]:
        body = super().answer(response)
        uncached, read, written = self.cache.account(self.requests[-1])
        body["usage"] = {
            **copy.deepcopy(body["usage"]),
            "input_tokens": uncached,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
        }
        return body


# -- a session driven through lw: a real worker, real sandboxed bash, the real adapter --
@dataclass
class Session:
    totals: CacheTotals
    result: AgentResult
    standin: CachingStandIn
    compactions: int


def _printer(turn: int, size: int) -> str:
    """A command printing ``size`` bytes that name its turn on every line."""
    line = f"turn {turn:04d} line %03d " + "." * 45
    return f"for i in $(seq 1 {max(size // 64, 1)}); do printf '{line}\\n' $i; done"


_TURN = re.compile(r"turn (\d{4}) line")
_DONE = re.compile(r"printed blocks 0\.\.(\d+)")


def session_brain(turns: int, size: int) -> Brain:
    """A Claude-like agent: a sentence and one bash call per turn, ``turns`` times, then
    finish; asked to summarise, a summary of ~1.5 KB. Its turn is read from what it
    printed last, so a retried or compacted turn asks for the same."""

    async def brain(request: ModelRequest) -> ModelResponse:
        # The newest block printed: in a result, or named by the summary once compacted
        # (a failed command, say a sandbox that could not start, prints none).
        done = max([-1, *map(int, _DONE.findall(request.summary))])
        for exchange in request.history:
            for result in exchange.results:
                done = max([done, *map(int, _TURN.findall(result.text))])
        if request.summarize:
            text = f"Summary: printed blocks 0..{done} with bash, one per turn. " * 24
            return ModelResponse(text=text)
        turn = done + 1
        if turn >= turns:
            return ModelResponse(text="All printed.", tool_calls=[
                ToolCall(name="finish", arguments={"summary": f"printed {turns} blocks"})
            ])  # fmt: skip
        call = ToolCall(name="bash", arguments={"command": _printer(turn, size)})
        return ModelResponse(text=f"Turn {turn}: printing the next block.", tool_calls=[call])

    return brain


async def run_session(
    client: Client,
    data_dir: Path,
    task_queue: str,
    *,
    turns: int,
    size: int = 4096,
    budget: int = 20_000,
) -> Session:
    """One planner run of ``turns`` turns printing ``size`` bytes each, its model
    Claude through the cache-keeping stand-in, with ``budget`` context tokens."""
    standin = CachingStandIn(session_brain(turns, size))
    definition = WorkflowDefinition(id="cached", max_turns=turns + 10)
    model = AnthropicModel(client=standin.client(), model="claude-sonnet-4-6")
    run = AgentId.planner("cached", task_queue)
    async with running_worker(
        client, data_dir=data_dir, definitions=[definition], model=model,
        task_queue=task_queue, model_calls=ModelCallOptions(context_budget_tokens=budget),
    ) as configured:  # fmt: skip
        result = await configured.execute_workflow(
            "lw.Planner",
            AgentInput(task="Print one block per turn, then finish."),
            id=str(run),
            task_queue=task_queue,
            result_type=AgentResult,
        )
    compactions = sum(
        1 for body in standin.requests
        if any(b.get("text") == COMPACT_NOTE for b in body["messages"][-1]["content"])
    )  # fmt: skip
    return Session(standin.cache.totals, result, standin, compactions)
