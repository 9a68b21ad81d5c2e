"""After ``lw-temporal memory redact`` (run while the worker runs), the redacted text is
no search hit for an agent or an operator, and no byte of it (nor of its words as the
index stems them) is left in any file of the store's search index, which held it
before; the rest of the file is still found."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, ModelRequest, Role, ToolCall, WorkflowDefinition
from lw_temporal.ids import AgentId, DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import lw_worker
from ._search_support import ranked

VAULT = WorkflowDefinition(id="vault")
STORE = StoreRef(StoreKind.WORKFLOW, "vault")
SECRET = "quixotic-marmalade"
#: The secret, its words, and the stems FTS5's porter tokenizer keeps of them.
TRACES = (SECRET, "quixotic", "marmalade", "quixot", "marmalad")
seen: list[tuple[bool, str]] = []


def _keep(request: ModelRequest) -> list[ToolCall]:
    seen.extend((r.ok, r.text) for r in request.last_results())
    return [tool("finish", summary="done")]


MODEL = ScriptedModel(
    {
        ("vault", Role.PLANNER): [
            [
                tool("memory_search", query="quixotic marmalade"),
                tool("memory_search", query="launch codeword this week"),
            ],
            _keep,
        ]
    }
)


def _index_bytes(stores: MemoryStores) -> bytes:
    folder = stores.files(STORE).search.dir
    return b"".join(p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file())


async def _lw(*args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "lw_temporal._cli", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_redacted_text_is_no_hit_and_leaves_the_index(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    admin = Provenance.admin("seed")
    stores.write(STORE, "briefing.md", b"# Briefing\n\nThe launch codeword changes weekly.\n",
                 provenance=admin)  # fmt: skip
    stores.append(STORE, "briefing.md", f"This week it is {SECRET}.\n".encode(), provenance=admin)
    for n in range(6):
        stores.write(STORE, f"other-{n}.md", f"Unrelated note {n}.\n".encode(), provenance=admin)
    assert stores.search(STORE, "quixotic marmalade").hits[0].path == "briefing.md"
    before = _index_bytes(stores)
    assert all(t.encode() in before for t in TRACES)  # the index held it

    async with lw_worker(dev_env, data_dir, task_queue, [VAULT], MODEL) as client:
        code, out, err = await _lw(
            "memory", "redact", "--data-dir", str(data_dir), "--by", "dpo",
            "workflow:vault", "briefing.md", SECRET,
        )  # fmt: skip
        assert code == 0, err
        assert out.startswith("redacted workflow:vault:briefing.md by dpo")
        await client.execute_workflow(
            "lw.Planner", AgentInput(task="look"), id=str(AgentId.planner("vault", task_queue)),
            task_queue=task_queue, result_type=AgentResult,
        )  # fmt: skip

    (ok_secret, by_secret), (ok_rest, by_rest) = seen
    assert ok_secret and ranked(by_secret) == [], by_secret
    assert SECRET not in by_secret.split("\n", 1)[1]  # past the echoed query
    assert ok_rest and ranked(by_rest)[0] == "/mnt/memory/workflow/briefing.md", by_rest
    assert "4: This week it is [REDACTED]." in by_rest, by_rest

    code, out, _err = await _lw(
        "memory", "search", "--data-dir", str(data_dir), "workflow:vault", "quixotic marmalade"
    )
    assert (code, out) == (1, "")
    after = _index_bytes(stores)
    assert [t for t in TRACES if t.encode() in after] == []
    assert b"[REDACTED]" in after
