"""A command's span counts all its memory changes and refusals, not the capped lists a
result carries (which stop at 100), and says which limit stopped it."""

from __future__ import annotations

from lw_temporal import BashResult
from lw_temporal._bash import MAX_LISTED_CHANGES, MemoryChange
from lw_temporal._telemetry._facts import Facts


def test_counts_come_from_the_count_fields() -> None:
    change = MemoryChange(path="/mnt/memory/workflow/d/x", kind="mkdir", store="workflow:cr")
    result = BashResult(
        exit_code=0,
        stdout="",
        stderr="",
        memory_changes=(change,) * MAX_LISTED_CHANGES,
        memory_changes_count=30_000,
        memory_refused=("/mnt/memory/workflow/x: too big",) * MAX_LISTED_CHANGES,
        memory_refused_count=50_001,
        stopped="the command was stopped: /mnt/scratch/own holds 1.5 GiB",
    )
    facts = Facts("lw.bash")
    facts.on_result(result)
    assert facts.attributes["lw.bash.memory_changes"] == 30_000
    assert facts.attributes["lw.bash.memory_refused"] == 50_001
    assert str(facts.attributes["lw.bash.stopped"]).startswith("the command was stopped")
