"""A store written by the earlier layout (one file per version reference and per
ledger record) loses nothing: its records read where they are until the store's first
lock moves them into its logs, after which a retried activity still replays and every
version still reads back."""

from __future__ import annotations

import json
from pathlib import Path

from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef, _apply

STORE = StoreRef(StoreKind.WORKFLOW, "notes")
ADMIN = Provenance.admin("t")
PROV = Provenance(
    namespace="default",
    workflow_id="run_notes@1",
    workflow_type="lw.Planner",
    run_id="r1",
    activity_id="7",
    activity_type="lw.memory.append",
    attempt=1,
    role="planner",
)


def _to_old_layout(state: Path) -> None:
    """Rewrite the store's logs the way the earlier layout kept them."""
    for log, folder in (("versions.log", "versions"), ("ledger.log", "ledger")):
        (state / folder).mkdir(exist_ok=True)
        last: dict[str, dict[str, object]] = {}
        for line in (state / log).read_bytes().splitlines():
            raw = json.loads(line)
            key = raw.pop("k")
            if key:
                last[key] = raw
        for key, raw in last.items():
            raw.pop("t", None)
            if not raw.get("gone"):
                (state / folder / f"{key}.json").write_text(json.dumps(raw))
        (state / log).unlink()


def test_an_old_layout_store_is_migrated_on_first_lock(data_dir: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    shas = [stores.write(STORE, "log.md", b"first\n", provenance=ADMIN).content_sha256]
    for i in range(3):
        shas.append(
            stores.append(STORE, "log.md", b"line %d\n" % i, provenance=ADMIN).content_sha256
        )
    stores.append(STORE, "log.md", b"by the planner\n", provenance=PROV)
    state = stores.state_dir(STORE)
    _to_old_layout(state)
    _apply._migrated.clear()  # a new worker process, after the upgrade

    fresh = MemoryStores(DataLayout.at(data_dir))
    assert fresh.recorded(STORE, PROV) is not None  # read where it is, before migrating
    assert fresh.blob(STORE, shas[1] or "") == b"first\nline 0\n"

    again = fresh.append(STORE, "log.md", b"by the planner\n", provenance=PROV)
    assert again.replayed  # the retry still finds its first attempt's record
    assert not list((state / "versions").glob("*.json"))
    assert not (state / "ledger").exists()
    fresh.append(STORE, "log.md", b"after\n", provenance=ADMIN)
    contents = [b"first\n" + b"".join(b"line %d\n" % i for i in range(n)) for n in range(4)]
    for sha, content in zip(shas, contents, strict=True):
        assert sha is not None and fresh.blob(STORE, sha) == content
    assert fresh.read_bytes(STORE, "log.md") == contents[3] + b"by the planner\nafter\n"
