"""A search is drawn only from what the searcher's role may read: a worker finds its
definition's memory, org and its attached peer's, never another definition's workflow
memory, the pipeline store when it is not in a pipeline, or dreaming's notes; an
orchestrator finds every available workflow's memory and its pipeline's. No argument
widens it: store names, paths and query syntax that try are refused or inert."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import (
    AgentInput,
    AgentResult,
    AttachSpec,
    MemoryConfig,
    ModelRequest,
    Role,
    ToolCall,
    WorkflowDefinition,
)
from lw_temporal.ids import AgentId, DataLayout, pipeline_key
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef
from lw_temporal.testing import ScriptedModel, ScriptTurn, tool

from ._hierarchy_support import lw_worker
from ._search_support import ranked

ALPHA = WorkflowDefinition(id="alpha", memory=MemoryConfig(attach=(AttachSpec(id="gamma"),)))
BETA = WorkflowDefinition(id="beta")
GAMMA = WorkflowDefinition(id="gamma")
DEFINITIONS = [ALPHA, BETA, GAMMA]
KEY = pipeline_key(DEFINITIONS)
OTHER_KEY = "0" * 64
STORES = {
    "alpha-store": StoreRef(StoreKind.WORKFLOW, "alpha"),
    "beta-store": StoreRef(StoreKind.WORKFLOW, "beta"),
    "gamma-store": StoreRef(StoreKind.WORKFLOW, "gamma"),
    "org-store": StoreRef(StoreKind.ORG, "org"),
    "pipeline-store": StoreRef(StoreKind.PIPELINE, KEY),
    "other-pipeline-store": StoreRef(StoreKind.PIPELINE, OTHER_KEY),
    "dreaming-store": StoreRef(StoreKind.DREAMING, "alpha"),
}
HOSTILE: list[dict[str, object]] = [
    {"query": "zanzibar", "stores": ["pipeline"]},
    {"query": "zanzibar", "stores": ["peer-workflows/beta"]},
    {"query": "zanzibar", "stores": ["../workflows/beta"]},
    {"query": "zanzibar", "stores": ["/mnt/memory/available-workflows/beta"]},
    {"query": "zanzibar", "path": "/mnt/memory/workflow/../../memory/workflows/beta"},
    {"query": "zanzibar", "path": "/mnt/scratch/own"},
    {"query": "zanzibar", "path": "/mnt/memory/pipeline/"},
]
SYNTAX = 'zanzibar" OR beta NEAR(store * body:zanzibar {text} ^'
seen: dict[str, list[tuple[bool, str]]] = {}


def _searches(name: str, calls: list[dict[str, object]]) -> list[ScriptTurn]:
    def ask(request: ModelRequest) -> list[ToolCall]:
        return [tool("memory_search", **c) for c in calls]

    def keep(request: ModelRequest) -> list[ToolCall]:
        seen[name] = [(r.ok, r.text) for r in request.last_results()]
        return [tool("finish", summary="done")]

    return [ask, keep]


MODEL = ScriptedModel(
    {
        ("alpha", Role.PLANNER): [[tool("run_step", task="search")], [tool("finish")]],
        ("alpha", Role.WORKER): _searches(
            "worker",
            [
                {"query": "zanzibar", "limit": 50},
                {"query": SYNTAX, "limit": 50},
                {"query": "zanzibar", "stores": ["peer-workflows/gamma", "org"]},
                {"query": "zanzibar", "path": "/mnt/memory/peer-workflows"},
                *HOSTILE,
            ],
        ),
        (None, Role.ORCHESTRATOR): _searches("orchestrator", [{"query": "zanzibar", "limit": 50}]),
    }
)


def _seed(data_dir: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    for marker, store in STORES.items():
        note = f"# Zanzibar\n\nzanzibar notes kept in the {marker}.\n"
        stores.write(store, "z.md", note.encode(), provenance=Provenance.admin("seed"))


async def test_worker_searches_only_what_it_may_read(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    _seed(data_dir)
    run = AgentId.planner("alpha", task_queue)
    async with lw_worker(dev_env, data_dir, task_queue, DEFINITIONS, MODEL) as client:
        await client.execute_workflow(
            "lw.Planner", AgentInput(task="go"), id=str(run), task_queue=task_queue,
            result_type=AgentResult,
        )  # fmt: skip
    results = seen.pop("worker")
    assert all(ok for ok, _text in results[:4]), results
    everything, syntax, narrowed, peers = (text for _ok, text in results[:4])
    allowed = {
        "/mnt/memory/workflow/z.md",
        "/mnt/memory/org/z.md",
        "/mnt/memory/peer-workflows/gamma/z.md",
    }
    assert set(ranked(everything)) == allowed, everything
    assert set(ranked(syntax)) == allowed, syntax  # operators in a query are words, no more
    assert set(ranked(narrowed)) == allowed - {"/mnt/memory/workflow/z.md"}
    assert set(ranked(peers)) == {"/mnt/memory/peer-workflows/gamma/z.md"}
    for text in (everything, syntax, narrowed, peers):
        for forbidden in ("beta-store", "pipeline-store", "dreaming-store"):
            assert forbidden not in text, text
    for request, (ok, text) in zip(HOSTILE, results[4:], strict=True):
        assert not ok, (request, text)
        assert text.startswith(("LwMemoryOutsideScope", "LwPathRejected")), (request, text)
        assert "zanzibar notes" not in text


async def test_orchestrator_searches_available_workflows_and_its_pipeline(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    _seed(data_dir)
    run = AgentId.orchestrator(task_queue)
    async with lw_worker(dev_env, data_dir, task_queue, DEFINITIONS, MODEL) as client:
        await client.execute_workflow(
            "lw.Orchestrator", AgentInput(task="go"), id=str(run), task_queue=task_queue,
            result_type=AgentResult,
        )  # fmt: skip
    [(ok, text)] = seen.pop("orchestrator")
    assert ok, text
    assert set(ranked(text)) == {
        "/mnt/memory/pipeline/z.md",
        "/mnt/memory/org/z.md",
        "/mnt/memory/available-workflows/alpha/z.md",
        "/mnt/memory/available-workflows/beta/z.md",
        "/mnt/memory/available-workflows/gamma/z.md",
    }, text
    assert "other-pipeline-store" not in text and "dreaming-store" not in text
