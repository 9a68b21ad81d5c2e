"""Memory names hold no bidirectional formatting characters and no line or paragraph
separators, whichever way they come in. ``x\\u202egpj.sh`` shows as ``xhs.jpg`` in a
listing, an audit line or the review page (the "Trojan Source" reordering), and
U+2028/U+2029 are line breaks to Python's ``str.splitlines`` and to JavaScript, so such
a name could disguise a file or split a line of whatever prints it. Through the
store's API the name is refused (``LwPathRejected``); a planner's bash command that
makes one keeps nothing and is told the name, escaped. Joiners that scripts need
(U+200C, U+200D) are still names."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._bash_staging import DISCARDED
from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef
from tests._bash_support import bash_worker, data_snapshot
from tests._dreaming_support import unique_definition

STORE = StoreRef(StoreKind.WORKFLOW, "names")
MARKS = ["\u202e", "\u202a", "\u2066", "\u2069", "\u200f", "\u061c", "\u2028", "\u2029"]


@pytest.mark.parametrize("mark", MARKS)
def test_the_api_refuses_a_name_holding_a_mark(tmp_path: Path, mark: str) -> None:
    stores = MemoryStores(DataLayout.at(tmp_path))
    for name in (f"x{mark}gpj.sh", f"d{mark}/notes.md"):
        with pytest.raises(ApplicationError) as refused:
            stores.write(STORE, name, b"hi\n", provenance=Provenance(actor="test"))
        assert refused.value.type == "LwPathRejected"
        assert "control character" in str(refused.value) and mark not in str(refused.value)
    root = tmp_path / "memory/workflows/names"
    assert not root.exists() or not any(root.iterdir())


def test_joiners_scripts_need_are_still_names(tmp_path: Path) -> None:
    stores = MemoryStores(DataLayout.at(tmp_path))
    for name in (
        "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645.md",
        "\U0001f469\u200d\U0001f52c.md",
    ):
        stores.write(STORE, name, b"hi\n", provenance=Provenance(actor="t"))
        assert stores.read(STORE, name).exists


async def test_a_command_making_one_keeps_nothing_and_is_told(
    dev_env: WorkflowEnvironment, data_dir: Path
) -> None:
    target = unique_definition("marks")
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id=target)], sandbox="bwrap")
    planner = f"run_{target}@{uuid.uuid4().hex[:8]}"
    scope = plugin.config.scope_of(planner, "lw.Planner")
    scope.own_scratch.mkdir(parents=True)
    async with bash_worker(dev_env, plugin) as bash:
        await bash.one(planner, "true")
        for mark, shown in (("\u202e", "\\u202e"), ("\u2028", "\\u2028")):
            before = data_snapshot(scope)
            command = (
                "echo kept > /mnt/memory/workflow/good.md; "
                f"printf x > \"$(printf '/mnt/memory/workflow/x{mark}gpj.sh')\""
            )
            result = await bash.one(planner, command)
            assert data_snapshot(scope) == before, mark
            assert result.memory_changes == ()
            refused = "\n".join(result.memory_refused)
            assert f"/mnt/memory/workflow/x{shown}gpj.sh: " in refused, refused
            assert "control character" in refused and mark not in refused, refused
            assert result.memory_refused[-1] == DISCARDED
        listing = await bash.one(planner, "ls /mnt/memory/workflow")
    assert listing.stdout == ""
