"""A command's commit refused because another writer changed a path while it ran names
that change as the command made it: a delete is reported as a delete, not a write, so
a reader of the result (or of a quarantine listing built from it) sees what was lost."""

from __future__ import annotations

import os
from pathlib import Path

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal.memory import Provenance, StoreChange, StoreKind, StoreRef

STORE = StoreRef(StoreKind.WORKFLOW, "notes")


def test_a_refused_delete_is_reported_as_a_delete(tmp_path: Path) -> None:
    plugin = LittleWorkflowPlugin(tmp_path / "data", [WorkflowDefinition(id="notes")])
    stores = plugin.memory
    stores.write(STORE, "f.md", b"old\n", provenance=Provenance.admin("seed"))
    mark = os.stat(stores.files(STORE).audit.path).st_size  # the command starts here
    stores.write(STORE, "f.md", b"meanwhile\n", provenance=Provenance.admin("other"))

    result = stores.commit_staged(
        STORE, [StoreChange(path="f.md", kind="delete")], Provenance.admin("cmd"), since=mark
    )

    assert not result.applied
    [refused] = [c for c in result.changes if c.status == "rejected"]
    assert (refused.path, refused.kind) == ("f.md", "delete")
    assert "changed by admin other" in (refused.reason or "")
    assert stores.read(STORE, "f.md").content == "meanwhile\n"
