"""An approval rule's ``store`` must be a mount a memory path can be in: a misspelt one
(``orgs``, ``workflows``) would never match, so the writes it was meant to hold for a
person would run unasked and bash would keep writing there too (README, "Humans in the
loop": a field the action has no use for is refused where the definition is written)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from lw_temporal import ApprovalRule


@pytest.mark.parametrize(
    "store", ["orgs", "workflows", "pipelines", "nope", "peer-workflows/X", "org/x"]
)
def test_a_store_no_memory_path_is_in_is_refused(store: str) -> None:
    with pytest.raises(ValidationError, match="must name a memory mount"):
        ApprovalRule(tool="memory_write", store=store)


@pytest.mark.parametrize(
    "store",
    ["workflow", "pipeline", "org", "peer-workflows/intake", "available-workflows/cr.v2"],
)
def test_every_mount_name_is_taken(store: str) -> None:
    assert ApprovalRule(tool="memory_write", store=store).store == store
