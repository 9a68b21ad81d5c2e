"""A new host told the deployment's memory id (``--memory-id``) whose memory root is
an empty mount point refuses to start, says the volume is probably not mounted, and
leaves the mount point as it found it: no id of its own is written there (which a
later start without ``--memory-id`` would adopt as "the" memory)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lw_temporal._topology import Topology, TopologyMismatch
from lw_temporal.ids import DataLayout


def test_an_empty_memory_root_with_an_expected_id_is_left_untouched(tmp_path: Path) -> None:
    deployment = Topology(DataLayout.split(tmp_path / "shared", tmp_path / "runs-a"))
    memory_id = deployment.check_start()
    empty_mount_point = tmp_path / "not-mounted"
    empty_mount_point.mkdir()
    new_host = DataLayout.split(empty_mount_point, tmp_path / "runs-b")
    with pytest.raises(TopologyMismatch) as refused:
        Topology(new_host, expected_memory_id=memory_id).check_start()
    assert "has no lw id" in str(refused.value)
    assert memory_id in str(refused.value) and "probably not mounted" in str(refused.value)
    assert list(empty_mount_point.iterdir()) == [], "a refused start creates nothing"
    assert not new_host.binding_file.exists()
