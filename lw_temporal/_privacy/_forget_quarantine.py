"""Forget reaches the quarantine: the held changes of the tree's runs are erased.

A tainted run's held changes are its own writes that no store holds yet (in
``.lw/quarantine/``): they go with the tree, and each removal is one line of the
quarantine's decision log (who, why: the forget), as a rejection would be. The taint
records stay, like manifests: they are provenance (which runs read what, and when).
"""

from __future__ import annotations

from ..memory._held import held_sets
from ..memory._quarantine import record_decision
from ._forget import Erasure, add_eraser, in_tree
from ._records import Place


@add_eraser
def quarantined(erasure: Erasure) -> None:
    """the tree's changes held in quarantine"""
    for held, current in list(held_sets(erasure.stores)):
        if not in_tree(current.workflow_id, erasure.tree_id):
            continue
        count, size = len(current.entries), current.size
        with held.locked():
            held.remove()
        erasure.removed.append(
            Place(
                what="quarantined changes",
                path=f"{current.workflow_id} {current.store}",
                files=count,
                bytes=size,
            )
        )
        record_decision(
            erasure.layout.state,
            {
                "workflow_id": current.workflow_id,
                "decision": "forget",
                "by": erasure.by,
                "why": erasure.why,
                "stores": [{"store": current.store, "applied": True, "count": count}],
            },
        )
