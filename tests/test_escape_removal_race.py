"""Escape class: steering a removal the worker does as root. A concurrent command of
the same agent renames the folder being removed (to beside an older folder of the same
name), or plants a link or a mount point in it: the removal, which walks by descriptor
and never climbs back through ``..``, removes only what was in the tree, never the
older folder, what a link points to or what is mounted there. Raced directly against
a renaming process, and through the real ``lw.bash`` quota trim with a parallel
command of the same agent, on both backends; checked on the host."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._sandbox import remove_tree
from lw_temporal.options import BashOptions, Limits
from tests._bash_support import bash_worker
from tests._escape_support import BACKENDS, WORKER

#: Moves ``new/a`` beside ``old/b`` and back, as fast as it can, until killed.
RENAMER = """
import os, sys
base = sys.argv[1]
print("ready", flush=True)
while True:
    try:
        os.rename(f"{base}/new/a", f"{base}/old/a")
        os.rename(f"{base}/old/a", f"{base}/new/a")
    except OSError:
        pass
"""


def _tree(base: Path) -> None:
    """``new/a`` (slow to empty: thousands of files, a few levels) beside ``new/b``,
    made first (a removal in inode order enters ``a`` while ``b`` is still to come),
    and the older ``old/b`` a climb through ``..`` from ``old/a`` would find."""
    for top in ("b", "a"):
        folder = base / "new" / top
        for depth in range(3):
            folder = folder / f"l{depth}"
            folder.mkdir(parents=True)
            for i in range(400):
                (folder / f"f{i}").write_bytes(b"x")
    (base / "old" / "b").mkdir(parents=True)
    (base / "old" / "b" / "keep").write_text("older\n")


def test_a_removal_raced_by_renames_stays_in_its_tree(tmp_path: Path) -> None:
    for round_ in range(40):
        base = tmp_path / f"round-{round_}"
        _tree(base)
        renamer = subprocess.Popen(
            [sys.executable, "-c", RENAMER, str(base)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert renamer.stdout is not None and renamer.stdout.readline() == "ready\n"
            # Entries kept moving in and out: it may give up, never stray.
            with contextlib.suppress(OSError):
                remove_tree(base / "new")
        finally:
            renamer.kill()
            renamer.wait()
        assert (base / "old" / "b" / "keep").read_text() == "older\n", round_


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts need root")
def test_a_removal_never_follows_a_link_or_enters_a_mount(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("host file\n")
    tree = tmp_path / "tree"
    (tree / "mnt").mkdir(parents=True)
    (tree / "link").symlink_to(outside)
    (tree / "file-link").symlink_to(outside / "keep")
    subprocess.run(["mount", "--bind", str(outside), str(tree / "mnt")], check=True)
    try:
        with pytest.raises(OSError):
            remove_tree(tree)  # the mount point cannot go: it says so
        assert (outside / "keep").read_text() == "host file\n"
        assert sorted(os.listdir(tree)) == ["mnt"]  # the links went, not their targets
    finally:
        subprocess.run(["umount", str(tree / "mnt")], check=True)
    remove_tree(tree)
    assert not tree.exists() and (outside / "keep").read_text() == "host file\n"


LIMITS = Limits(writable_entries=1500, writable_bytes=1 << 30)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_quota_trim_raced_by_the_same_agent_removes_nothing_older(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    plugin = LittleWorkflowPlugin(
        data_dir, [WorkflowDefinition(id="cr")], sandbox=backend, bash=BashOptions(limits=LIMITS)
    )
    writer = (  # new/b alone is past the quota; new/a is what the mover moves
        "mkdir -p new/a/l1 new/b; (cd new/a/l1 && seq -f f%g 300 | xargs touch); "
        "(cd new/b && seq -f f%g 2000 | xargs touch); echo wrote"
    )
    mover = (
        "for i in $(seq 3000); do mv new/a old/a 2>/dev/null; mv old/a new/a 2>/dev/null; "
        "done; echo moved"
    )
    async with bash_worker(dev_env, plugin) as bash:
        await bash.one(WORKER, "mkdir -p old/b && echo older > old/b/keep")
        raced = await bash.run(WORKER, [writer, mover], timeout_seconds=60, parallel=True)
        after = await bash.one(WORKER, "cat old/b/keep; ls old")
    assert any(r.stopped for r in raced), raced  # over the entries quota: trimmed
    assert after.stdout.startswith("older\n"), after
