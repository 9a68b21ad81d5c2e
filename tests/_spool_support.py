"""Appenders of the spool tests: a provenance per appender, and an append made in a
process of its own (spawned, so it is another writer of the store, with a spool of
its own), which reports its outcome on a queue."""

from __future__ import annotations

from typing import Any

from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef

STORE = StoreRef(StoreKind.WORKFLOW, "notes")


def provenance(who: str, *, keyed: bool = True) -> Provenance:
    """An activity's provenance (with an idempotency key, so its mutation may be
    spooled, unless ``keyed`` is false)."""
    return Provenance(
        namespace="default",
        workflow_id=f"run_notes@{who}",
        workflow_type="lw.Planner",
        run_id=f"r-{who}",
        activity_id="1" if keyed else None,
        activity_type="lw.memory.append",
        attempt=1,
        role="planner",
    )


def requester(data_dir: str, who: str, report: Any) -> None:
    """One append of ``who``'s line to ``shared.md``, from this process: reports
    ``(who, (op, replayed))``, or ``(who, "<error type>: <message>")``."""
    stores = MemoryStores(DataLayout.at(data_dir))
    try:
        result = stores.append(STORE, "shared.md", f"{who}\n".encode(), provenance=provenance(who))
    except Exception as err:
        report.put((who, f"{type(err).__name__}: {err}"))
    else:
        report.put((who, (result.op, result.replayed)))
