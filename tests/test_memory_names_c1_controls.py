"""Memory names hold no control characters, C1 ones included: U+0085 (NEL) is a line
break to Python's ``str.splitlines`` and to some viewers, and U+009B is a terminal's
one-byte CSI, so a name holding them could split or colour a line of a listing or an
audit as read by whatever tool is not this project's own printer."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError

from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef

STORE = StoreRef(StoreKind.WORKFLOW, "names")


@pytest.mark.parametrize("name", ["x\x85y.md", "x\x9b31m.md", "d\x80/x.md", "x\x9f"])
def test_c1_control_names_are_refused(tmp_path: Path, name: str) -> None:
    stores = MemoryStores(DataLayout.at(tmp_path))
    with pytest.raises(ApplicationError) as refused:
        stores.write(STORE, name, b"hi\n", provenance=Provenance(actor="test"))
    assert refused.value.type == "LwPathRejected"
    assert "control character" in str(refused.value)
    assert not (tmp_path / "memory/workflows/names").exists() or not any(
        (tmp_path / "memory/workflows/names").iterdir()
    )


def test_printable_unicode_names_are_still_taken(tmp_path: Path) -> None:
    stores = MemoryStores(DataLayout.at(tmp_path))
    stores.write(STORE, "caf\u00e9 \u00a0notes.md", b"hi\n", provenance=Provenance(actor="t"))
    assert stores.read(STORE, "caf\u00e9 \u00a0notes.md").exists
