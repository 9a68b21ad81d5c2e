"""``MemoryStores.redact`` refuses what cannot be a redaction before it touches the
store: a pattern that does not compile, one that matches empty text (it would put the
replacement between every byte of every version), and a file that neither exists nor
has kept versions. The command line shows the same refusals; the library is where they
live."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError

from lw_temporal.errors import INVALID_REQUEST, MEMORY_NOT_FOUND
from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef

STORE = StoreRef(StoreKind.WORKFLOW, "notes")
DPO = Provenance.admin("dpo")


@pytest.mark.parametrize(
    ("pattern", "regex", "kind", "says"),
    [
        ("(", True, INVALID_REQUEST, "is not a valid regex"),
        ("x*", True, INVALID_REQUEST, "matches empty text"),
        ("", False, INVALID_REQUEST, "matches empty text"),
        ("secret", False, MEMORY_NOT_FOUND, "workflow:notes:gone.md does not exist"),
    ],
)
def test_redact_refuses_and_changes_nothing(
    data_dir: Path, pattern: str, regex: bool, kind: str, says: str
) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    stores.write(STORE, "a.md", b"a secret\n", provenance=DPO)
    audit = stores.audit(STORE)
    path = "gone.md" if kind == MEMORY_NOT_FOUND else "a.md"
    with pytest.raises(ApplicationError) as raised:
        stores.redact(STORE, path, pattern, regex=regex, provenance=DPO)
    assert raised.value.type == kind and says in raised.value.message
    assert raised.value.non_retryable
    assert stores.read(STORE, "a.md").content == "a secret\n"
    assert stores.audit(STORE) == audit
