"""What a store's quota counts of its kept versions is what they take on disk: an
append or a small edit keeps the version before it as a reference in the versions log,
and the running count adds that record as written. It counted the reference without
its key, so after 400 appends a store counted 34,905 bytes of versions where a recount
found 63,322, and a store could hold nearly twice its byte quota in references."""

from __future__ import annotations

from pathlib import Path

from lw_temporal import LittleWorkflowPlugin, MemoryQuota, WorkflowDefinition
from lw_temporal.memory import Provenance, StoreKind, StoreRef

STORE = StoreRef(StoreKind.WORKFLOW, "cr")


def test_running_count_of_versions_matches_a_recount(data_dir: Path) -> None:
    quota = MemoryQuota(max_bytes=1 << 30, max_files=1000)
    stores = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr", quota=quota)]).memory
    admin = Provenance.admin("test")
    stores.write(STORE, "notes/log.md", b"# log\n", provenance=admin)
    stores.write(STORE, "doc.md", b"".join(b"line %d\n" % i for i in range(200)), provenance=admin)
    for i in range(300):
        stores.append(STORE, "notes/log.md", b"- entry %d\n" % i, provenance=admin)
    for i in range(50):  # small edits: each keeps the old region as a splice reference
        stores.replace(STORE, "doc.md", f"line {i}\n", f"line {i} (edited)\n", provenance=admin)
    counted = stores.usage(STORE)
    stores.recount(STORE)
    found = stores.usage(STORE)
    assert found.versions > 300 * 100  # the references are there
    assert counted.versions == found.versions, (counted, found)
    assert (counted.live, counted.files, counted.dirs) == (found.live, found.files, found.dirs)
