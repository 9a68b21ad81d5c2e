"""The data dir's bookkeeping (``.lw/``) is passable but closed: under a root worker
``.lw/`` itself is 0711, every folder in it the worker's own (0700) but the sandbox
and staging folders an agent's command is given paths in (0711), and every file in it
0600, whether made before the worker started or by the runs since (the run owners'
records, the taint book, the memory root's id and the runs root's binding once were
made open to listing or reading by anyone who can pass the data dir: its agents).
Checked on the host after real commands and memory writes through the real
activities."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._taint import TaintBook, TaintMarks
from lw_temporal.memory import Provenance, StoreKind, StoreRef
from tests._bash_support import bash_worker

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="only a root worker closes by mode")

PLANNER = "pipeline_closed/sub-runs/run_cr@1"
STEP = f"{PLANNER}/steps/step_1"
PASSED = {"sandbox", "staging"}


def _open_entries(state: Path) -> list[str]:
    found = []
    for entry in os.scandir(state):
        mode = stat.S_IMODE(entry.stat(follow_symlinks=False).st_mode)
        if entry.is_dir(follow_symlinks=False):
            wanted = 0o711 if entry.name in PASSED else 0o700
        else:
            wanted = 0o600
        if mode != wanted:
            found.append(f"{entry.name}: {mode:o}, not {wanted:o}")
    return found


@root_only
async def test_bookkeeping_is_closed_after_real_runs(
    dev_env: WorkflowEnvironment, data_dir: Path
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")], sandbox="bwrap")
    async with bash_worker(dev_env, plugin) as bash:
        await bash.one(PLANNER, "echo plan > plan.md && echo note >> /mnt/memory/workflow/n.md")
        done = await bash.one(STEP, "cat /mnt/scratch/from-planner/plan.md")
    assert done.stdout == "plan\n", done.stderr
    plugin.memory.write(
        StoreRef(StoreKind.WORKFLOW, "cr"), "admin.md", b"x\n", provenance=Provenance.admin("t")
    )
    plugin.config.topology.check_start()  # the ids a worker's start records, made now
    layout = plugin.config.layout
    # what a run that reads untrusted input makes: its taint record and its marks
    TaintBook(layout).network_begins(PLANNER)
    TaintMarks(layout).add(StoreRef(StoreKind.WORKFLOW, "cr"), ["n.md"], PLANNER)
    state = layout.state
    assert stat.S_IMODE(state.stat().st_mode) == 0o711
    names = {e.name for e in os.scandir(state)}
    assert {"owners", "memory-id", "binding.json", "stores"} <= names, names
    assert _open_entries(state) == []
    taint = [state / "taint", *(p for p in (state / "taint").rglob("*") if p.is_dir())]
    assert len(taint) >= 4, taint  # taint/, runs/<tree>/, stores/workflow/
    assert {f"{p.relative_to(state)}: {stat.S_IMODE(p.stat().st_mode):o}" for p in taint} == {
        f"{p.relative_to(state)}: 700" for p in taint
    }
