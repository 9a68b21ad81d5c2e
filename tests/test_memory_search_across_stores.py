"""A search over several stores ranks their chunks as one collection: a planner whose
workflow store holds hundreds of notes finds the org note that answers its question
first, though the org store holds three notes (where FTS5's ``bm25()`` gives every word
its floor weight, so the answer scored a millionth of a workflow note sharing one word
with the question and was left out of the result); and a word in most of the org's
notes but rare among all is looked up there (it was left out as common, so the org
notes holding only it were no hits). Scored again, one store's chunks keep exactly the
scores ``bm25()`` gave them."""

from __future__ import annotations

import random
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, ModelRequest, Role, ToolCall, WorkflowDefinition
from lw_temporal.ids import AgentId, DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef
from lw_temporal.memory._search import Query, SearchTarget
from lw_temporal.memory._searchmerge import rescore
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import lw_worker
from ._search_support import ranked

RELEASES = WorkflowDefinition(id="releases")
WORKFLOW = StoreRef(StoreKind.WORKFLOW, "releases")
ORG = StoreRef(StoreKind.ORG, "org")
SEED = Provenance.admin("seed")
FILLER = str.split("rollback timeout probe health vault staging database lesson review pager")
QUESTION = "what to do when a canary deploy times out"
#: "canary" is in two of the org's three notes, "captain" in one.
OWNER = "canary captain"
seen: list[tuple[bool, str]] = []


def _keep(request: ModelRequest) -> list[ToolCall]:
    seen.extend((not r.is_error, r.text) for r in request.last_results())
    return [tool("finish", summary="done")]


MODEL = ScriptedModel(
    {
        ("releases", Role.PLANNER): [
            [tool("memory_search", query=QUESTION), tool("memory_search", query=OWNER)],
            _keep,
        ]
    }
)


def _seed(stores: MemoryStores) -> None:
    rnd = random.Random(29)
    for i in range(300):
        words = " ".join(rnd.choice(FILLER) for _ in range(30))
        stores.write(WORKFLOW, f"notes/n{i:03}.md", f"{words}\n".encode(), provenance=SEED)
    stores.write(
        WORKFLOW, "notes/birds.md", b"The canary in the office sings at noon.\n", provenance=SEED
    )
    stores.write(
        ORG,
        "policy/canary.md",
        b"# Canary deploys\n\nWhen a canary deploy times out, halt the rollout and page "
        b"the on-call lead.\n",
        provenance=SEED,
    )
    stores.write(
        ORG, "policy/owners.md", b"Canary rollouts wait for the release captain.\n",
        provenance=SEED,
    )  # fmt: skip
    stores.write(ORG, "holidays.md", b"Holidays are listed in the wiki.\n", provenance=SEED)


async def test_small_store_answer_ranks_first(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    _seed(MemoryStores(DataLayout.at(data_dir)))
    run = AgentId.planner("releases", task_queue)
    async with lw_worker(dev_env, data_dir, task_queue, [RELEASES], MODEL) as client:
        await client.execute_workflow(
            "lw.Planner", AgentInput(task="go"), id=str(run), task_queue=task_queue,
            result_type=AgentResult,
        )  # fmt: skip
    [(ok, text), (owner_ok, owner)] = seen
    assert ok, text
    assert ranked(text)[:3] == [
        "/mnt/memory/org/policy/canary.md",
        "/mnt/memory/org/policy/owners.md",
        "/mnt/memory/workflow/notes/birds.md",
    ], text
    assert owner_ok, owner
    assert ranked(owner) == [
        "/mnt/memory/org/policy/owners.md",
        "/mnt/memory/org/policy/canary.md",
        "/mnt/memory/workflow/notes/birds.md",
    ], owner


def test_one_store_keeps_bm25_scores(tmp_path: Path) -> None:
    stores = MemoryStores(DataLayout.at(tmp_path))
    _seed(stores)
    for query in (QUESTION, "staging vault", "pager review lesson rollback", "canary"):
        search = Query(stores, [SearchTarget(WORKFLOW)], query, 10, None)
        search.words(None)
        assert search.by_words
        again = rescore(search.by_words, search._counts({0: search.by_words}))
        for before, after in zip(search.by_words, again, strict=True):
            assert abs(before.score - after.score) <= 1e-9 * abs(before.score), query
