"""The default consolidator is deterministic, de-duplicates lessons, counts failures
and successes in runs, and accumulates over the last approved dream's state, which it
keeps out of the note."""

from __future__ import annotations

from lw_temporal import DreamContext, RunRecord
from lw_temporal.dreaming import (
    CommandRecord,
    Consolidation,
    DefaultConsolidator,
    FailureRecord,
    MemoryOpRecord,
)

NOTE = DefaultConsolidator.NOTE_PATH


def run(n: int, *commands: tuple[str, int], lessons: str = "", failure: str = "") -> RunRecord:
    return RunRecord(
        workflow_id=f"run_t@{n}",
        run_id=str(n),
        status="COMPLETED",
        close_time=None,
        commands=tuple(CommandRecord(command=c, exit_code=e) for c, e in commands),
        memory_ops=(
            MemoryOpRecord(
                op="append", path="/mnt/memory/workflow/l.md", content=lessons, store="workflow"
            ),
            MemoryOpRecord(
                op="write", path="/mnt/memory/pipeline/x.md", content="- not ours", store="pipeline"
            ),
        ),
        failures=(FailureRecord(source="activity:lw.model", message=failure),) if failure else (),
    )


RUNS = [
    run(1, ("pytest -q", 0), ("make  lint", 2), ("make lint", 2), lessons="- Check inputs\n"),
    run(2, ("pytest   -q", 0), ("make lint", 2), lessons="* check inputs\n1. use -- carefully"),
    run(3, ("ls", 0), lessons="# heading\n", failure="quota"),
]


def consolidate_with(state: dict[str, object] | None = None) -> Consolidation:
    context = DreamContext(target="t", workflow_id="dream_t@1", state=state or {})
    result = DefaultConsolidator().consolidate(context, iter(RUNS))
    assert [n.path for n in result.notes] == [NOTE]
    return result


def consolidate(state: dict[str, object] | None = None) -> str:
    return consolidate_with(state).notes[0].content


def body(note: str) -> str:
    assert "<!--" not in note, "no bookkeeping in a note"
    return note


def test_counts_are_runs_and_lessons_are_deduplicated() -> None:
    shown = body(consolidate())
    assert "Consolidated from 3 finished runs (3 new in dream_t@1)" in shown
    assert "- Check inputs (2 runs)" in shown
    assert "- use -- carefully" in shown
    assert "not ours" not in shown, "only the target's workflow memory holds its lessons"
    assert "heading" not in shown
    assert "- 2 runs: `make lint` exited 2" in shown, "once per run, however often"
    assert "quota" not in shown, "one run's failure is not recurring"
    assert "- 2 runs: `pytest -q`" in shown
    assert "- 1 run: `ls`" in shown


def test_output_is_deterministic() -> None:
    assert consolidate() == consolidate()


def test_the_approved_state_is_accumulated_not_repeated() -> None:
    first = consolidate_with()
    second = body(consolidate(first.state))
    assert "Consolidated from 6 finished runs (3 new in dream_t@1)" in second
    assert "- Check inputs (4 runs)" in second
    assert "- 4 runs: `make lint` exited 2" in second
    assert "- 2 runs: activity:lw.model failed: quota" in second, "recurring across dreams"


def test_a_damaged_state_is_ignored() -> None:
    damaged: dict[str, object] = {"runs": "many", "lessons": [["x"]], "failures": 3}
    assert "Consolidated from 3 finished runs" in consolidate(damaged)


def test_a_heredoc_shows_as_its_first_line() -> None:
    heredoc = RunRecord(
        workflow_id="run_t@9",
        run_id="9",
        status="COMPLETED",
        close_time=None,
        commands=(CommandRecord(command="cat > x.md <<'EOF'\nsecret body\nEOF", exit_code=0),),
    )
    context = DreamContext(target="t", workflow_id="dream_t@1")
    note = DefaultConsolidator().consolidate(context, iter([heredoc])).notes[0].content
    assert "`cat > x.md <<'EOF' …`" in note
    assert "secret body" not in note
