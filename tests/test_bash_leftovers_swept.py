"""Staging a killed worker left is swept when the next worker starts, and a running
peer's is not.

Two real worker processes share the data dir: one is killed (SIGKILL, mid-command as
far as its folders show: an overlay staging set with a 1,200-deep tree in its upper
folder, and a Landlock private folder), one keeps running. The next worker's start
removes everything of the killed one (its Landlock ``TMPDIR`` and staging root on
``/dev/shm`` and its lock included), keeps the live peer's, says so in a typed
report, and then serves commands."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._sandbox import SweepReport, remove_tree
from lw_temporal._sandbox._landlock import SHM
from tests._bash_support import bash_worker

PLANNER = "pipeline_left/sub-runs/run_cr@1"
#: A worker process that claims its folders, fills them as a command would, and waits.
PEER = """
import os, sys
from pathlib import Path
from lw_temporal._sandbox import WorkerClaim
state = Path(sys.argv[1])
claim = WorkerClaim(state)
staging = state / "staging" / claim.name()
deep = staging / "upper"
deep.mkdir(parents=True)
os.chdir(deep)
for _ in range(1200):
    os.mkdir("d")
    os.chdir("d")
Path("f").write_text("left\\n")
(state / "sandbox" / f"run-{claim.name()}" / "tmp").mkdir(parents=True)
Path("/dev/shm", f"lw-tmp-run-{claim.name()}").mkdir()
Path("/dev/shm", f"lw-staging-{claim.owner}.root").mkdir()  # its staging root on a tmpfs
print(claim.owner, flush=True)
sys.stdin.read()
"""


def _start_peer(state: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", PEER, str(state)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def _owned(state: Path, owner: str) -> list[str]:
    return sorted(
        p.name
        for folder in (state / "staging", state / "sandbox", state / "sandbox" / "owners", SHM)
        if folder.is_dir()
        for p in folder.iterdir()
        if owner in p.name
    )


async def test_a_killed_workers_staging_is_swept_at_start(
    dev_env: WorkflowEnvironment, data_dir: Path
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")])
    state = plugin.config.layout.local_state
    killed, dead_owner = _start_peer(state)
    live, live_owner = _start_peer(state)
    try:
        killed.kill()
        killed.wait()
        assert len(_owned(state, dead_owner)) == 5  # staging, private, TMPDIR, shm staging, lock
        activities = plugin.bash_activities
        async with activities.serving():
            report = activities.sweep_leftovers()  # idempotent: nothing left to do
            async with bash_worker(dev_env, plugin) as bash:
                wrote = await bash.one(PLANNER, "echo x > /mnt/memory/workflow/a.md && echo ok")
        assert _owned(state, dead_owner) == []
        assert len(_owned(state, live_owner)) == 5
        assert isinstance(report, SweepReport) and report.live == 1 and report.folders == 0
        assert wrote.stdout == "ok\n", wrote.stderr
    finally:
        live.communicate("")
        remove_tree(state / "staging")  # the peer's 1,200-deep tree, whatever happened
        for name in _owned(state, live_owner):
            if name.startswith(("lw-tmp-run-", "lw-staging-")):
                remove_tree(SHM / name)
