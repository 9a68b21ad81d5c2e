"""With an embedder (``OpenAIEmbedder`` on the real ``openai`` SDK, over a replay of
the embeddings API), ``memory_search`` also ranks by meaning: a question in other
words than the note's finds it first, which ranking by words cannot; each chunk is
embedded once (a later search sends only its query); when the embeddings API fails the
search still answers, by words, and says why."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, ModelRequest, Role, ToolCall, WorkflowDefinition
from lw_temporal.ids import AgentId, DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef
from lw_temporal.models import OpenAIEmbedder
from lw_temporal.options import MemoryOptions
from lw_temporal.testing import ScriptedModel, ScriptTurn, tool

from ._embeddings_standin import EmbeddingsStandIn
from ._hierarchy_support import lw_worker
from ._provider_standins import Fault
from ._search_support import ranked

GARAGE = WorkflowDefinition(id="garage")
STORE = StoreRef(StoreKind.WORKFLOW, "garage")
NOTES = {
    "cars.md": "# Workshop\n\nTo fix a broken car, call the mechanic on Elm Street.\n",
    "billing.md": "# Billing\n\nSend every invoice within a week.\n",
    "pets.md": "# Pets\n\nThe office dog sleeps under the desk.\n",
    "hours.md": "# Hours\n\nWe open at nine and close at six.\n",
    "parking.md": "# Parking\n\nVisitors park behind the building.\n",
}
QUESTION = "mend faulty automobile"  # not one word in common with cars.md
seen: list[tuple[bool, str]] = []


def _keep(then: ToolCall) -> ScriptTurn:
    def turn(request: ModelRequest) -> list[ToolCall]:
        seen.extend((r.ok, r.text) for r in request.last_results())
        return [then]

    return turn


AGAIN = tool("memory_search", query="faulty vehicle")
MODEL = ScriptedModel(
    {
        ("garage", Role.PLANNER): [
            [tool("memory_search", query=QUESTION)],
            _keep(AGAIN),  # answered 429 by the API
            _keep(AGAIN),
            _keep(tool("finish", summary="done")),
        ]
    }
)


async def test_search_ranks_by_meaning_with_an_embedder(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    for rel, text in NOTES.items():
        stores.write(STORE, rel, text.encode(), provenance=Provenance.admin("seed"))
    assert stores.search(STORE, QUESTION).hits == ()  # by words alone: nothing

    standin = EmbeddingsStandIn(faults={1: Fault(429, "openai_rate_limit.json")})
    embedder = OpenAIEmbedder(
        client=standin.client(), model="text-embedding-3-small", dimensions=16, sdk_retries=0
    )
    memory = MemoryOptions(embedder=embedder)
    async with lw_worker(dev_env, data_dir, task_queue, [GARAGE], MODEL, memory=memory) as client:
        await client.execute_workflow(
            "lw.Planner", AgentInput(task="look"), id=str(AgentId.planner("garage", task_queue)),
            task_queue=task_queue, result_type=AgentResult,
        )  # fmt: skip

    assert standin.violations == []
    (ok1, first), (ok2, failed) = seen[:2]
    assert ok1 and ranked(first)[0] == "/mnt/memory/workflow/cars.md", first
    assert "by words (BM25) and by meaning (embeddings)" in first
    assert "3: To fix a broken car, call the mechanic" in first  # its first lines
    # the second search hit the 429: by words only, saying so
    assert ok2 and "ranking by meaning failed" in failed and "rate limited (429)" in failed
    assert "no embedder is configured" not in failed
    assert ranked(failed) == []  # "faulty vehicle" shares no word with any note

    first_request, _limited, third = standin.requests
    assert first_request["encoding_format"] == "float" and first_request["dimensions"] == 16
    assert first_request["input"][0] == QUESTION
    assert len(first_request["input"]) == 1 + len(NOTES)  # every chunk, once
    assert third["input"] == ["faulty vehicle"]  # chunks already embedded: only the query
    ok3, again = seen[2]
    assert ok3 and ranked(again)[0] == "/mnt/memory/workflow/cars.md", again
