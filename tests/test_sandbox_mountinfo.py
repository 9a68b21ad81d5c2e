"""What ``/proc/self/mountinfo`` under bwrap tells a command about the host: the
overlay of writable memory and the stores that do not exist yet name no host path
(no data dir, no staging folder); only a bound scratch folder shows its own path, as
the kernel prints every bind's source (the README's guarantees table says so)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lw_temporal import WorkflowDefinition
from lw_temporal._bash import BashActivities
from lw_temporal._config import LwConfig
from lw_temporal._sandbox import BwrapBackend, OutputSink, run_sandboxed
from lw_temporal._scope import Mount

PLANNER = ("run_cr@1", "lw.Planner")
WORKER = ("run_cr@1/steps/step_1", "lw.Worker")


@pytest.mark.parametrize("role", [PLANNER, WORKER], ids=["planner", "worker"])
async def test_mountinfo_names_no_staging_or_store_path(
    tmp_path: Path, role: tuple[str, str]
) -> None:
    data_dir = tmp_path / "data"
    config = LwConfig.create(data_dir, [WorkflowDefinition(id="cr")])
    activities = BashActivities(config)
    scope = config.scope_of(*role)
    backend = activities.backend()
    assert isinstance(backend, BwrapBackend)
    staged: list[tuple[Mount, Path]] = []
    spec = activities._spec(scope, backend, "cat /proc/self/mountinfo", 30, staged)
    out = OutputSink(1 << 16, 0, tmp_path / "stdout")
    err = OutputSink(1 << 16, 0, tmp_path / "stderr")
    outcome = await run_sandboxed(backend, spec, out, err)
    assert outcome.exit_code == 0, bytes(err.head)
    lines = bytes(out.head).decode().splitlines()
    by_target = {line.split()[4]: line for line in lines}
    assert "/mnt/memory/org" not in by_target  # a folder of the sandbox's own root
    host = [line for line in lines if str(data_dir) in line]
    assert [line.split()[4] for line in host] == ["/mnt/scratch/own"], host
    assert ".lw" not in "\n".join(lines)
    if role == PLANNER:
        overlay = by_target["/mnt/memory/workflow"]
        assert " - overlay lw-overlay " in overlay
        options = overlay.split(" - ")[1]
        assert re.search(r"lowerdir=(/proc/self/fd/\d+/)?lower,upperdir=\1upper,", options)
        assert len(staged) == 1
