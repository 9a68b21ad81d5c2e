"""Changes a planner makes with bash in its sandbox (a write, a ``>>`` append, a
``sed -i``, an ``rm``) are in the search index as soon as their commit returns, with
the right line numbers; a command whose changes were refused (a secret) leaves the
index as it was."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, ModelRequest, Role, ToolCall, WorkflowDefinition
from lw_temporal.ids import AgentId, DataLayout
from lw_temporal.memory import MemoryStores, StoreKind, StoreRef
from lw_temporal.testing import ScriptedModel, ScriptTurn, tool

from ._hierarchy_support import lw_worker
from ._search_support import ranked

FIELD = WorkflowDefinition(id="field")
STORE = StoreRef(StoreKind.WORKFLOW, "field")
WF = "/mnt/memory/workflow"
KEY = "AKIA" + "Q3EGRIXTWJ7LUMEN"
seen: dict[str, tuple[bool, str]] = {}


def _bash(command: str) -> ToolCall:
    return tool("bash", command=command)


def _keep(names: list[str], then: list[ToolCall]) -> ScriptTurn:
    def turn(request: ModelRequest) -> list[ToolCall]:
        results = request.last_results()
        for name, result in zip(names, results[-len(names) :], strict=True):
            seen[name] = (result.ok, result.text)
        return then

    return turn


SEARCHES = ["ocelot", "first", "opening", "walrus", "kingfisher"]
MODEL = ScriptedModel(
    {
        ("field", Role.PLANNER): [
            [
                _bash(f"printf '# Log\\n\\nfirst entry\\n' > {WF}/log.md"),
                _bash(f"printf 'a walrus sighting\\n' > {WF}/gone.md"),
                tool("memory_search", query="first entry walrus"),  # builds the index
            ],
            _keep(
                ["built"],
                [
                    _bash(f"echo 'the ocelot escaped at noon' >> {WF}/log.md"),
                    _bash(f"sed -i 's/first entry/opening entry/' {WF}/log.md"),
                    _bash(f"rm {WF}/gone.md"),
                    _bash(f"echo kingfisher >> {WF}/log.md && echo {KEY} > {WF}/key.md"),
                    tool("memory_search", query="ocelot escaped"),
                    tool("memory_search", query="first"),
                    tool("memory_search", query="opening entry"),
                    tool("memory_search", query="walrus"),
                    tool("memory_search", query="kingfisher"),
                ],
            ),
            _keep(SEARCHES, [tool("finish", summary="done")]),
        ]
    }
)


async def test_bash_changes_are_indexed(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    run = AgentId.planner("field", task_queue)
    async with lw_worker(dev_env, data_dir, task_queue, [FIELD], MODEL) as client:
        result = await client.execute_workflow(
            "lw.Planner", AgentInput(task="log"), id=str(run), task_queue=task_queue,
            result_type=AgentResult,
        )  # fmt: skip
    assert result.summary == "done"
    ok, built = seen["built"]
    assert ok and set(ranked(built)) == {f"{WF}/log.md", f"{WF}/gone.md"}, built
    for name in SEARCHES:
        assert seen[name][0], seen[name]
    assert ranked(seen["ocelot"][1]) == [f"{WF}/log.md"]
    assert "4: the ocelot escaped at noon" in seen["ocelot"][1]
    assert ranked(seen["first"][1]) == [], seen["first"][1]  # sed -i replaced it
    assert ranked(seen["opening"][1]) == [f"{WF}/log.md"]
    assert "3: opening entry" in seen["opening"][1]
    assert ranked(seen["walrus"][1]) == []  # rm
    assert ranked(seen["kingfisher"][1]) == []  # refused with the secret beside it

    stores = MemoryStores(DataLayout.at(data_dir))
    assert not stores.root(STORE).joinpath("key.md").exists()
    # the commits kept the index: it was built once, never rebuilt or repaired
    assert len(list(stores.files(STORE).search.dir.glob("index-*.db"))) == 1
