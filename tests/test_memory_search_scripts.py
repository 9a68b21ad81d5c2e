"""A query finds a note in its own script as it was written: Korean (whose syllables
NFKD cuts into jamo the index never holds), Japanese with voiced kana (whose voicing
mark NFKD splits off), Latin with accents written either way; and words that differ
only by accents or case are one word of the query. Through a planner's
``memory_search`` and the operator's ``MemoryStores.search``."""

from __future__ import annotations

import unicodedata
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, ModelRequest, Role, ToolCall, WorkflowDefinition
from lw_temporal.ids import AgentId, DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef
from lw_temporal.memory._chunks import query_terms
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import lw_worker
from ._search_support import ranked

NOTES = WorkflowDefinition(id="notes")
STORE = StoreRef(StoreKind.WORKFLOW, "notes")
WF = "/mnt/memory/workflow"
FILES = {
    "ko.md": "배포 실패 시 롤백 절차\n",
    "ja.md": "データベース の 移行 です\n",
    "fr.md": unicodedata.normalize("NFD", "Le résumé du café\n"),
    "other.md": "Nothing to see here.\n",
    "more.md": "Still nothing.\n",
}
#: Each query and the file it must find first.
QUERIES = {
    "배포 실패": "ko.md",
    "データベース": "ja.md",
    "です": "ja.md",
    "résumé": "fr.md",
    "CAFE": "fr.md",
}
seen: list[tuple[bool, str]] = []


def _keep(request: ModelRequest) -> list[ToolCall]:
    seen.extend((not r.is_error, r.text) for r in request.last_results())
    return [tool("finish", summary="done")]


MODEL = ScriptedModel(
    {
        ("notes", Role.PLANNER): [
            [tool("memory_search", query=q, limit=3) for q in QUERIES],
            _keep,
        ]
    }
)


async def test_queries_find_notes_in_their_own_script(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    for rel, text in FILES.items():
        stores.write(STORE, rel, text.encode(), provenance=Provenance.admin("seed"))
    for query, answer in QUERIES.items():
        assert [h.path for h in stores.search(STORE, query).hits][:1] == [answer], query
    run = AgentId.planner("notes", task_queue)
    async with lw_worker(dev_env, data_dir, task_queue, [NOTES], MODEL) as client:
        await client.execute_workflow(
            "lw.Planner", AgentInput(task="go"), id=str(run), task_queue=task_queue,
            result_type=AgentResult,
        )  # fmt: skip
    assert len(seen) == len(QUERIES)
    for (ok, text), answer in zip(seen, QUERIES.values(), strict=True):
        assert ok, text
        assert ranked(text)[:1] == [f"{WF}/{answer}"], text


def test_words_alike_but_for_accents_and_case_are_one() -> None:
    assert query_terms("Résumé resume RESUME re\u0301sume\u0301") == ["résumé"]
    assert query_terms("배포 배포") == ["배포"]
