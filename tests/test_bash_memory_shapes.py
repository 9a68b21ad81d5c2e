"""Shapes a command leaves in workflow memory that no store should take, refused at
capture before a byte is read, with the store as it was.

12,000 folders under a 5-file quota, 20 folders (folders count), a tree 1,200 folders
deep, 200 sparse 255 MiB files, a file over the per-file quota by its size alone:
each is one planner step through the real ``lw.bash`` (one attempt allowed) that gets
a result naming the limit, keeps nothing, leaves no staging folder, and the worker
serves the next command. What is kept carries no setuid/setgid bit and no fifo or
socket, and a result lists at most ``MAX_LISTED_CHANGES`` changes with their count.
"""

from __future__ import annotations

import stat
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, MemoryQuota, WorkflowDefinition
from lw_temporal._bash import MAX_LISTED_CHANGES
from lw_temporal._bash_staging import DISCARDED
from lw_temporal.memory import Provenance, StoreKind, StoreRef
from tests._bash_support import SANDBOXES, bash_worker, data_snapshot
from tests.test_bash_hostile_names import _staging_is_clean

SMALL = MemoryQuota(max_files=5, max_file_bytes=4096)
MEMORY = "/mnt/memory/workflow"
# (case, command, words the refusal must hold)
REFUSED = [
    (
        # Past the 10,000 entries one capture takes (50,000 only take longer to make).
        "12000-folders",
        f"cd {MEMORY} && seq -f d%06g 12000 | xargs mkdir",
        "more than 10000 entries",
    ),
    ("20-folders", f"mkdir {MEMORY}/d{{1..20}}", "folders count"),
    ("1200-deep", f"mkdir -p {MEMORY}/$(printf 'd/%.0s' $(seq 1200))", "nest more than 64 deep"),
    ("sparse-files", f"truncate -s 255M {MEMORY}/s{{1..200}}", "sparse or not"),
    ("over-file-quota", f"truncate -s 5000 {MEMORY}/big.bin", "MemoryQuota.max_file_bytes"),
]


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_hostile_shapes_are_refused_before_reading(
    dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str
) -> None:
    target = f"shapes-{uuid.uuid4().hex[:8]}"
    plugin = LittleWorkflowPlugin(
        data_dir, [WorkflowDefinition(id=target, quota=SMALL)], sandbox=sandbox
    )
    planner = f"run_{target}@{uuid.uuid4().hex[:8]}"
    scope = plugin.config.scope_of(planner, "lw.Planner")
    scope.own_scratch.mkdir(parents=True)
    ref = StoreRef(StoreKind.WORKFLOW, target)
    plugin.memory.write(ref, "notes.md", b"notes\n", provenance=Provenance.admin("seed"))
    store = plugin.memory.root(ref)
    async with bash_worker(dev_env, plugin) as bash:
        await bash.one(planner, "true")  # the lease sets owners and modes: before comparing
        for case, command, words in REFUSED:
            before = data_snapshot(scope)
            result, after_it = await bash.run(planner, [command, f"cat {MEMORY}/notes.md"])
            assert data_snapshot(scope) == before, case
            assert _staging_is_clean(plugin), case
            assert result.memory_changes == () and after_it.stdout == "notes\n", case
            if sandbox == "bwrap":
                refused = "\n".join(result.memory_refused)
                assert words in refused, (case, refused)
                assert len(refused) < 2000, "one reason, not one line per entry"
                last = result.memory_refused[-1]
                assert last == DISCARDED or last.endswith(
                    "rolled back with the rest of this command's memory changes"
                ), last
            else:  # no overlay: workflow memory is read-only to bash here
                assert result.exit_code != 0, case

        # Each step on its own: the sandbox may refuse the chmod or the mkfifo itself.
        kept = await bash.one(
            planner,
            f"cd {MEMORY}; echo x > suid; chmod 4755 suid; mkdir sg; chmod 2775 sg;"
            " echo y > sg/f; chmod 6755 sg/f; mkfifo fifo; python3 -c "
            "'import socket; socket.socket(socket.AF_UNIX).bind(\"sock\")'; true",
        )
    if sandbox == "landlock":
        assert sorted(p.name for p in store.iterdir()) == ["notes.md"]
        return
    assert kept.exit_code == 0, kept.stderr
    assert {c.path.removeprefix(f"{MEMORY}/") for c in kept.memory_changes} == {
        "suid",
        "sg",
        "sg/f",
    }
    for name in ("fifo", "sock"):
        left_out = [r for r in kept.memory_refused if f"/{name}: only files and folders" in r]
        assert left_out or f"{name}: " in kept.stderr or "Operation not permitted" in kept.stderr
    for path in [store / "suid", store / "sg", store / "sg" / "f"]:
        mode = path.lstat().st_mode
        assert not mode & (stat.S_ISUID | stat.S_ISGID), (path, oct(mode))
    assert sorted(p.name for p in store.iterdir()) == ["notes.md", "sg", "suid"]


@pytest.mark.parametrize("sandbox", SANDBOXES[:1])  # memory writes need the overlay
async def test_a_result_lists_a_bounded_number_of_changes(
    dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str
) -> None:
    target = f"many-{uuid.uuid4().hex[:8]}"
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id=target)], sandbox=sandbox)
    planner = f"run_{target}@{uuid.uuid4().hex[:8]}"
    async with bash_worker(dev_env, plugin) as bash:
        result = await bash.one(
            planner,
            f"cd {MEMORY} && touch f{{1..150}} && for i in {{1..150}}; do ln -s f1 l$i; done",
        )
    assert result.exit_code == 0, result.stderr
    assert len(result.memory_changes) == MAX_LISTED_CHANGES
    assert result.memory_changes_count == 150
    assert len(result.memory_refused) == MAX_LISTED_CHANGES
    assert result.memory_refused_count == 150
    assert len(list(plugin.memory.root(StoreRef(StoreKind.WORKFLOW, target)).iterdir())) == 150
