"""A store that already holds a name memory refuses (planted on disk, or kept from
before such names were refused at commit) stays fully usable: ``lw.memory.list``
shows it escaped with the reason (valid JSON through Temporal), bash lists and reads
around it on both backends, and ``lw-temporal memory audit|versions|restore|redact``
keep working on the store."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._sandbox import remove_tree
from lw_temporal.memory import Provenance, StoreKind, StoreRef
from tests._bash_support import SANDBOXES, bash_worker
from tests._memory_support import call, memory_harness
from tests.test_bash_hostile_names import SECRET, admin_still_works

PLANTED = (b"bad\xffname", b"ctl\x1b[31mred", b"line\nbreak.md")


def _plant(root: Path) -> None:
    for name in PLANTED:
        with open(os.path.join(os.fsencode(root), name), "wb") as f:
            f.write(b"planted\n")


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_a_store_with_planted_names_stays_usable(
    dev_env: WorkflowEnvironment,
    data_dir: Path,
    sandbox: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    target = f"planted{uuid.uuid4().hex[:6]}"
    store = StoreRef(StoreKind.WORKFLOW, target)
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id=target)], sandbox=sandbox)
    first = plugin.memory.write(
        store, "lessons.md", f"call {SECRET}\n".encode(), provenance=Provenance.admin("seed")
    )
    plugin.memory.append(store, "lessons.md", b"then retry\n", provenance=Provenance.admin("seed"))
    _plant(plugin.memory.root(store))
    planner = f"run_{target}@{uuid.uuid4().hex[:8]}"
    plugin.config.scope_of(planner, "lw.Planner").own_scratch.mkdir(parents=True)

    async with memory_harness(dev_env, plugin, f"mem-{uuid.uuid4().hex[:8]}") as run:
        (listed,) = await run(planner, call("lw.memory.list", path="/mnt/memory/workflow"))
    assert listed.ok, listed.message
    text = str(listed.result)
    assert "bad\\\\xffname" in text and "not valid UTF-8" in text, text
    assert "control character" in text and "lessons.md" in text

    async with bash_worker(dev_env, plugin) as bash:  # another run: an ID names one run
        listing, read = await bash.run(
            f"run_{target}@{uuid.uuid4().hex[:8]}",
            ["ls /mnt/memory/workflow | wc -l", "cat /mnt/memory/workflow/lessons.md"],
        )
    assert listing.exit_code == 0 and read.stdout == f"call {SECRET}\nthen retry\n"

    assert first.content_sha256 is not None
    await admin_still_works(capsys, plugin, store, first.content_sha256)


def test_a_planted_tree_deeper_than_the_stack_lists(data_dir: Path) -> None:
    """1,200 folders deep (past Python's recursion limit and, one descriptor per
    level, past a 1,024 open-file limit): listing walks it without either."""
    target = f"deep{uuid.uuid4().hex[:6]}"
    store = StoreRef(StoreKind.WORKFLOW, target)
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id=target)])
    plugin.memory.write(store, "top.md", b"top\n", provenance=Provenance.admin("seed"))
    root = plugin.memory.root(store)
    fd = os.open(root, os.O_RDONLY)
    for _ in range(1200):  # os.makedirs itself recurses per level
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(fd)
    try:
        listing = plugin.memory.list_files(store, recursive=True)
        assert len(listing.entries) == 1201
        assert listing.entries[0].path == "d" and listing.entries[-1].path == "top.md"
        assert listing.entries[1199].path == "d/" * 1199 + "d"
    finally:
        remove_tree(root / "d")
