"""An untrusted path must lie under a folder the agents' memory view has: one under a
misspelt mount (``/mnt/memory/orgs/inbox/``) was taken and never read, so the runs that
read the real inbox went untainted and their writes were never held (README, "Taint and
quarantine")."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from lw_temporal import MemoryConfig


@pytest.mark.parametrize(
    "path", ["/mnt/memory/orgs/inbox/", "/mnt/memory/workflows/x", "/mnt/memory/peer/intake/"]
)
def test_a_path_under_no_mount_is_refused(path: str) -> None:
    with pytest.raises(ValidationError, match="must name a folder or file"):
        MemoryConfig(untrusted=(path,))


@pytest.mark.parametrize(
    "path",
    [
        "/mnt/memory/org/inbox/",
        "/mnt/memory/workflow/drop",
        "/mnt/memory/pipeline/x.md",
        "/mnt/memory/peer-workflows/intake/",
        "/mnt/memory/peer-workflows/",
    ],
)
def test_a_path_under_a_mount_is_taken(path: str) -> None:
    assert MemoryConfig(untrusted=(path,)).untrusted == (path.rstrip("/"),)
