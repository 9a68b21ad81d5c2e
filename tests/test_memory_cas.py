"""Compare-and-set: of many processes writing with the same ``if_sha256`` (or all
creating a file that must not exist yet), exactly one wins; the others get a typed,
non-retryable conflict and their content is nowhere."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal.ids import DataLayout
from lw_temporal.memory import ABSENT, MemoryStores, Provenance, StoreKind, StoreRef

from ._memory_support import call, memory_harness

STORE = StoreRef(StoreKind.WORKFLOW, "notes")


def _contender(data_dir: str, index: int, expected: str, start: object, results: object) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    start.wait()  # type: ignore[attr-defined]
    try:
        stores.write(
            STORE, "counter.md", f"winner {index}\n".encode(), provenance=Provenance.admin(
                f"p{index}"), if_sha256=expected,
        )  # fmt: skip
        results.put((index, "won"))  # type: ignore[attr-defined]
    except ApplicationError as err:
        results.put((index, f"{err.type}:{err.non_retryable}"))  # type: ignore[attr-defined]


def _race(data_dir: Path, expected: str, contenders: int = 8) -> list[tuple[int, str]]:
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_contender, args=(str(data_dir), i, expected, start, results))
        for i in range(contenders)
    ]
    for p in procs:
        p.start()
    start.set()
    outcomes = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return outcomes


@pytest.mark.parametrize("precondition", ["existing", "absent"])
def test_cas_race_has_exactly_one_winner(data_dir: Path, precondition: str) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    if precondition == "existing":
        expected = stores.write(
            STORE, "counter.md", b"start\n", provenance=Provenance.admin("setup")
        ).content_sha256
        assert expected is not None
    else:
        expected = ABSENT
    outcomes = _race(data_dir, expected)
    winners = [i for i, o in outcomes if o == "won"]
    assert len(winners) == 1, outcomes
    assert sorted(o for _, o in outcomes if o != "won") == ["LwMemoryConflict:True"] * 7
    final = stores.read(STORE, "counter.md")
    assert final.content == f"winner {winners[0]}\n"
    writes = [e for e in stores.audit(STORE) if e.actor != "setup"]
    assert len(writes) == 1 and writes[0].actor == f"p{winners[0]}"


async def test_cas_through_activities(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="notes")])
    path = "/mnt/memory/workflow/state.md"
    async with memory_harness(dev_env, plugin, task_queue) as run:
        first = await run(
            f"run_notes@{task_queue}",
            call("lw.memory.write", path=path, content="v1", if_sha256=ABSENT),
            call("lw.memory.write", path=path, content="again", if_sha256=ABSENT),
        )
        sha = first[0].result["content_sha256"]
        racers = await run(
            f"run_notes@{task_queue}-2",
            *[call("lw.memory.write", path=path, content=f"v2 by {i}", if_sha256=sha)
              for i in range(6)],
            parallel=True,
        )  # fmt: skip
        bad = await run(
            f"run_notes@{task_queue}-3",
            call("lw.memory.write", path=path, content="x", if_sha256="not-a-sha"),
        )
    assert first[0].ok and first[1].error_type == "LwMemoryConflict"
    assert sum(o.ok for o in racers) == 1
    assert {o.error_type for o in racers if not o.ok} == {"LwMemoryConflict"}
    winner = next(o for o in racers if o.ok)
    assert winner.result["previous_sha256"] == sha
    content = (data_dir / "memory/workflows/notes/state.md").read_text()
    assert winner.result["content_sha256"] == plugin.memory.read(STORE, "state.md").content_sha256
    assert content.startswith("v2 by ")
    assert bad[0].error_type == "LwInvalidRequest"
