"""``forget --memory revert``: each file only the forgotten tree changed since its first
change goes back to how it was before (removed when the tree created it), audited with
the forgetter; a file another run changed afterwards is left and named. Without
``--memory`` the files are only named."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, ModelRequest, Role, ToolCall
from lw_temporal.memory import StoreKind, StoreRef
from lw_temporal.testing import ScriptedModel, tool

from ._cli_support import cli
from ._hierarchy_support import lw_worker
from ._privacy_support import PLANTED, secret_definition


def _writes(request: ModelRequest) -> list[ToolCall]:
    """The first run writes two files; the second changes only the shared one."""
    shared = tool(
        "memory_append", path="/mnt/memory/workflow/shared.md", content=f"{request.task}\n"
    )
    if request.task.startswith("first"):
        return [
            tool("memory_write", path="/mnt/memory/workflow/people.md", content=PLANTED),
            shared,
        ]
    return [shared]


async def test_revert_undoes_only_what_no_one_changed_since(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    definition = secret_definition()
    model = ScriptedModel(
        {(definition.id, Role.PLANNER): [_writes, [tool("finish", summary="done")]]}
    )
    store = StoreRef(StoreKind.WORKFLOW, definition.id)
    first, second = (f"run_{definition.id}@{n}" for n in ("one", "two"))
    async with lw_worker(dev_env, data_dir, task_queue, [definition], model) as client:
        for run, task in ((first, "first run"), (second, "second run")):
            await client.execute_workflow(
                "lw.Planner", AgentInput(task=task), id=run, task_queue=task_queue
            )
    root = data_dir / "memory" / "workflows" / definition.id
    assert (root / "people.md").read_text() == PLANTED

    base = ("forget", first, "--data-dir", str(data_dir), "--by", "dpo", "--why", "request")
    code, out, err = await cli(dev_env, *base)
    assert code == 0, out + err
    assert f"remains  memory written by the tree workflow:{definition.id}:people.md" in out
    assert (root / "people.md").exists(), "without --memory, memory stays"

    code, out, err = await cli(dev_env, *base, "--memory", "revert")
    assert code == 0, out + err
    assert f"removed  memory reverted workflow:{definition.id}:people.md: removed" in out
    assert f"remains  memory not reverted workflow:{definition.id}:shared.md: changed " in out
    assert second in out
    assert not (root / "people.md").exists()
    assert (root / "shared.md").read_text() == "first run\nsecond run\n"

    from lw_temporal.ids import DataLayout
    from lw_temporal.memory import MemoryStores

    audit = MemoryStores(DataLayout.at(data_dir)).audit(store, path="people.md")
    assert (audit[-1].op, audit[-1].actor) == ("delete", "dpo")
