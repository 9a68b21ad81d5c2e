"""A worker whose memory root is not the one its runs (and its peers) use refuses to
start, saying which roots disagree and what to mount; an activity of a run started
with another memory root fails instead of writing into a second copy of the stores."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError

from lw_temporal._topology import Topology, TopologyMismatch
from lw_temporal.ids import AgentId, DataLayout

REPO = Path(__file__).resolve().parent.parent


def _worker(memory: Path, runs: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "lw_temporal._cli",
            "worker",
            "--definitions",
            "workflows.pipeline:DEFINITIONS",
            "--address",
            "127.0.0.1:1",  # never reached: the roots are checked first
            "--memory-root",
            str(memory),
            "--runs-root",
            str(runs),
            *extra,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_an_unmounted_memory_volume_stops_the_worker(tmp_path: Path) -> None:
    shared, runs = tmp_path / "shared", tmp_path / "runs"
    Topology(DataLayout.split(shared, runs), host="a").check_start()
    empty_mount_point = tmp_path / "not-mounted"
    empty_mount_point.mkdir()
    done = _worker(empty_mount_point, runs, "--host", "a")
    assert done.returncode == 2, done
    assert "has no lw id" in done.stderr and "probably not mounted" in done.stderr
    assert "--memory-root" in done.stderr and "pinned runs" in done.stderr
    assert not (empty_mount_point / ".lw").exists(), "a refused start creates nothing"


def test_another_memory_root_is_refused(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    first = Topology(DataLayout.split(tmp_path / "shared", runs)).check_start()
    other = DataLayout.split(tmp_path / "other", runs)
    Topology(DataLayout.at(tmp_path / "other")).check_start()  # has an id of its own
    with pytest.raises(TopologyMismatch) as err:
        Topology(other).check_start()
    assert f"served memory {first}" in str(err.value)
    assert "fresh --runs-root" in str(err.value)


def test_the_expected_memory_id_is_checked(tmp_path: Path) -> None:
    layout = DataLayout.split(tmp_path / "shared", tmp_path / "runs")
    actual = Topology(layout).check_start()
    assert Topology(layout, expected_memory_id=actual).check_start() == actual
    with pytest.raises(TopologyMismatch, match="not 0000"):
        Topology(
            DataLayout.split(tmp_path / "shared", tmp_path / "runs-2"), expected_memory_id="0000"
        ).check_start()


def test_a_run_marked_with_another_memory_fails_its_activities(tmp_path: Path) -> None:
    layout = DataLayout.split(tmp_path / "shared", tmp_path / "runs")
    topology = Topology(layout, host="a")
    pipeline = AgentId.orchestrator("p1")
    topology.check_placement(str(pipeline), pipeline)  # a top-level run: marked here
    marker = layout.run_marker(pipeline)
    assert json.loads(marker.read_text())["memory_id"] == topology.memory_id()
    step = pipeline.sub_run("candidate-review", "1").step_run("1")
    topology.check_placement(str(step), step)  # its tree is here: marked too
    assert json.loads(layout.run_marker(step).read_text())["host"] == "a"
    other_host = Topology(DataLayout.split(tmp_path / "shared", tmp_path / "runs-b"), host="b")
    with pytest.raises(ApplicationError, match="lives on host 'a'"):
        other_host.check_placement(str(step), step)

    marker.write_text(json.dumps({"host": "a", "memory_id": "elsewhere"}))
    with pytest.raises(ApplicationError) as err:
        topology.check_placement(str(pipeline), pipeline)
    assert err.value.type == "LwWrongTopology" and err.value.non_retryable
    assert "memory root id elsewhere" in err.value.message
