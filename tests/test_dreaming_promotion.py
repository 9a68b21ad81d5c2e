"""The promotion gate: a dream writes to its own store only; approval copies its notes
into the target's memory with the approver audited; rejection, timeout and a
concurrent edit of the target leave the target as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from lw_temporal.dreaming import (
    DefaultConsolidator,
    DreamResult,
    DreamStatus,
    approve_dream,
    reject_dream,
)

from ._dreaming_support import (
    Script,
    Step,
    dreaming_worker,
    run_planners,
    start_dream,
    unique_definition,
    wait_for_status,
)

NOTE = DefaultConsolidator.NOTE_PATH
SCRIPTS = [
    Script(commands=["pytest -q", "exit 3"], lessons=["pin the parser version"]),
    Script(
        commands=["exit 3"],
        lessons=["Pin the parser  version", "read the CV twice"],
        steps=[Step(commands=["pytest -q"])],
    ),
    Script(commands=["make lint"], fail="model quota exhausted"),
]


def tree(root: Path) -> dict[str, bytes]:
    if not root.exists():
        return {}
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def target_store(data_dir: Path, target: str) -> Path:
    return data_dir / "memory" / "workflows" / target


def own_note(data_dir: Path, target: str) -> Path:
    return data_dir / "memory" / "workflows" / "memory.dreaming" / target / NOTE


def audit_entries(data_dir: Path) -> list[dict[str, object]]:
    entries: list[dict[str, object]] = []
    for path in sorted((data_dir / ".lw").rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                entry = json.loads(line)
                if isinstance(entry, dict) and "store" in entry:
                    entries.append(entry)
    return entries


async def test_approval_promotes_the_notes_with_the_approver_audited(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    target = unique_definition("review")
    async with dreaming_worker(dev_env, data_dir, task_queue, [target]) as client:
        ids = await run_planners(client, task_queue, target, SCRIPTS)
        before = tree(target_store(data_dir, target))
        handle = await start_dream(client, task_queue, target)
        state = await wait_for_status(handle, DreamStatus.AWAITING_APPROVAL)

        assert tree(target_store(data_dir, target)) == before, (
            "a dream alone never writes the target"
        )
        note = own_note(data_dir, target).read_text()
        assert state.runs == 3
        assert [c.path for c in state.changes] == [NOTE]
        assert set(state.changes[0].sources) == set(ids), "the note came from the dream's runs"
        assert "- pin the parser version (2 runs)" in note, "lessons are de-duplicated"
        assert "- read the CV twice" in note
        assert "- 2 runs: `exit 3` exited 3" in note, "a recurring failure with its count"
        assert "<!--" not in note, "the tallies live in .lw/, not in the note"
        assert "model quota exhausted" not in note, "a one-off failure is not recurring"
        assert "- 2 runs: `pytest -q`" in note, "commands that worked, the step's included"

        outcome = await approve_dream(client, handle.id, "alice", "looks right")
        result = await handle.result()

    assert outcome.promoted == (NOTE,) and outcome.conflicts == ()
    assert (target_store(data_dir, target) / NOTE).read_text() == note
    assert isinstance(result, DreamResult)
    assert result.status is DreamStatus.APPROVED
    assert result.decision is not None and result.decision.who == "alice"
    promotions = [
        e
        for e in audit_entries(data_dir)
        if e["store"] == f"workflow:{target}" and e["path"] == NOTE
    ]
    assert len(promotions) == 1
    assert promotions[0]["actor"] == "alice"


async def test_rejection_leaves_the_target_untouched(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    target = unique_definition("review")
    async with dreaming_worker(dev_env, data_dir, task_queue, [target]) as client:
        await run_planners(client, task_queue, target, SCRIPTS[:2])
        before = tree(target_store(data_dir, target))
        handle = await start_dream(client, task_queue, target)
        await wait_for_status(handle, DreamStatus.AWAITING_APPROVAL)
        status = await reject_dream(client, handle.id, "bob", "too noisy")
        result = await handle.result()
        with pytest.raises(RPCError, match="already completed"):
            await approve_dream(client, handle.id, "mallory", "approve after reject")

    assert status is DreamStatus.REJECTED
    assert result.status is DreamStatus.REJECTED
    assert tree(target_store(data_dir, target)) == before
    assert not any(e["store"] == f"workflow:{target}" for e in audit_entries(data_dir))


async def test_a_concurrent_edit_of_the_target_is_reported_not_overwritten(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    target = unique_definition("review")
    async with dreaming_worker(dev_env, data_dir, task_queue, [target]) as client:
        await run_planners(client, task_queue, target, SCRIPTS[:1])
        handle = await start_dream(client, task_queue, target)
        await wait_for_status(handle, DreamStatus.AWAITING_APPROVAL)
        edited = target_store(data_dir, target) / NOTE
        edited.parent.mkdir(parents=True, exist_ok=True)
        edited.write_text("a curator's hand edit\n")
        outcome = await approve_dream(client, handle.id, "alice", "ship it")
        state = await wait_for_status(handle, DreamStatus.AWAITING_APPROVAL)
        await reject_dream(client, handle.id, "alice", "the curator's edit wins")
        result = await handle.result()

    assert outcome.promoted == ()
    assert len(outcome.conflicts) == 1 and NOTE in outcome.conflicts[0]
    assert edited.read_text() == "a curator's hand edit\n"
    assert state.decision is None, "a conflict decides nothing: the proposal still waits"
    assert result.status is DreamStatus.REJECTED


async def test_an_unreviewed_dream_times_out_and_keeps_its_runs_for_the_next(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    target = unique_definition("review")
    async with dreaming_worker(dev_env, data_dir, task_queue, [target]) as client:
        await run_planners(client, task_queue, target, SCRIPTS[:1])
        before = tree(target_store(data_dir, target))
        handle = await start_dream(client, task_queue, target, approval_timeout=1)
        result = await handle.result()
        assert tree(target_store(data_dir, target)) == before
        again = await start_dream(client, task_queue, target)
        state = await wait_for_status(again, DreamStatus.AWAITING_APPROVAL)
        await reject_dream(client, again.id, "bob", "seen enough")

    assert result.status is DreamStatus.TIMED_OUT
    assert result.runs == 1
    assert state.runs == 1, "the unreviewed run went back to the next dream"
