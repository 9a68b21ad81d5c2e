"""Clearing is cache-aware: a 70-turn session whose results outgrow a 20,000-token
budget, sent by the real ``AnthropicModel`` to a stand-in applying Anthropic's
documented prompt-cache rules, reads at least 85% of its input tokens from the cache
and costs at most 1.3x what a perfect cache would charge for the same requests: results
are cleared in rare, large batches, and a breakpoint where the unchanged part ends keeps
it cached across each clearing."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from ._prompt_cache import MAX_BREAKPOINTS, run_session

TURNS = 70


async def test_seventy_turns_with_clearing_stay_cached(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    session = await run_session(dev_env.client, data_dir, task_queue, turns=TURNS)
    totals = session.totals
    assert session.standin.violations == []
    assert session.result.turns == TURNS + 1
    cleared = [b for b in session.standin.requests if "[cleared to fit" in str(b["messages"])]
    assert cleared, "the session never outgrew its budget"
    assert totals.hit_fraction >= 0.85, totals.line()
    assert totals.cost_ratio <= 1.3, totals.line()
    for body in session.standin.requests:
        assert str(body).count("'cache_control'") <= MAX_BREAKPOINTS
    # Each turn was billed as the stand-in counted it (the adapter reads its usage).
    usage = session.result.usage
    assert usage.cached_tokens == totals.read_tokens
    assert usage.cache_write_tokens == totals.written_tokens
