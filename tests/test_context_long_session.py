"""A session of any length: 500 turns of ~4 KB output each under a 20,000-token budget
complete without a context overflow. Once clearing alone cannot keep room, the older
turns are compacted into a summary the model writes (recorded beside the turn files,
shown after the task from then on), their full transcript is saved in the agent's
scratch, and every request stays within the budget and valid for the strict stand-in."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal._agent._compaction import COMPACTED_FOLDER
from lw_temporal.ids import AgentId, DataLayout

from ._prompt_cache import run_session

TURNS = 500
BUDGET = 20_000


def _recorded(data_dir: Path, run: AgentId) -> tuple[list[Path], list[Path]]:
    """The summary files and the saved transcripts of the run's compactions."""
    layout = DataLayout.at(data_dir)
    summaries = sorted((layout.local_state / "conversations").rglob("summary-*.json"))
    transcripts = sorted((layout.scratch(run) / COMPACTED_FOLDER).glob("turns-*.md"))
    return summaries, transcripts


async def test_five_hundred_turns_complete(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    session = await run_session(dev_env.client, data_dir, task_queue, turns=TURNS, budget=BUDGET)
    assert session.standin.violations == []
    assert session.result.turns == TURNS + 1
    assert session.result.summary == f"printed {TURNS} blocks"
    assert session.compactions >= 5
    # No request outgrew the budget (the stand-in counts ~4 bytes a token, lw 3).
    assert session.totals.largest_request <= BUDGET
    summaries, transcripts = _recorded(data_dir, AgentId.planner("cached", task_queue))
    assert len(summaries) == session.compactions
    assert len(transcripts) == session.compactions
    # The last request still starts from the task, then the newest summary.
    last = session.standin.requests[-1]["messages"][0]["content"]
    assert last[0]["text"] == "Print one block per turn, then finish."
    assert last[1]["text"].startswith("[Turns 1-")
    # The compacted turns can be read back in full: the first block is in the first file.
    assert "turn 0000 line 001" in transcripts[0].read_text()
    assert session.totals.hit_fraction >= 0.8, session.totals.line()
