"""``forget --memory revert`` reaches memory search's index: the note a forgotten run
wrote is no hit once it is reverted, and no byte of it (nor of its stemmed words) is
left in the store's index files, which held it before; the forget report says the
index was scrubbed."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, Role
from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef
from lw_temporal.testing import ScriptedModel, tool

from ._cli_support import cli
from ._hierarchy_support import lw_worker
from ._privacy_support import PLANTED, secret_definition

#: The planted text and the stems the index keeps of its words.
TRACES = (PLANTED, "zora", "quintavall")


def _index_bytes(stores: MemoryStores, store: StoreRef) -> bytes:
    folder = stores.files(store).search.dir
    return b"".join(p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file())


async def test_forget_revert_scrubs_the_search_index(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    definition = secret_definition()
    store = StoreRef(StoreKind.WORKFLOW, definition.id)
    stores = MemoryStores(DataLayout.at(data_dir))
    for n in range(6):
        stores.write(store, f"note-{n}.md", f"An ordinary note {n}.\n".encode(),
                     provenance=Provenance.admin("seed"))  # fmt: skip
    note = f"# People\n\nReviewed {PLANTED} today.\n"
    write = tool("memory_write", path="/mnt/memory/workflow/people.md", content=note)
    model = ScriptedModel(
        {(definition.id, Role.PLANNER): [[write], [tool("finish", summary="done")]]}
    )
    run = f"run_{definition.id}@forgotten"
    async with lw_worker(dev_env, data_dir, task_queue, [definition], model) as client:
        await client.execute_workflow("lw.Planner", AgentInput(task="go"), id=run,
                                      task_queue=task_queue)  # fmt: skip
    assert stores.search(store, "Zora Quintavalle").hits[0].path == "people.md"
    assert all(t.lower().encode() in _index_bytes(stores, store).lower() for t in TRACES)

    code, out, err = await cli(
        dev_env, "forget", run, "--data-dir", str(data_dir), "--by", "dpo", "--why", "request",
        "--memory", "revert",
    )  # fmt: skip
    assert code == 0, out + err
    assert f"search index scrubbed workflow:{definition.id}" in out, out
    assert stores.search(store, "Zora Quintavalle").hits == ()
    after = _index_bytes(stores, store).lower()
    assert [t for t in TRACES if t.lower().encode() in after] == []
    assert stores.search(store, "ordinary note").hits  # the rest is still found
