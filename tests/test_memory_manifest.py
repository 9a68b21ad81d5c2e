"""Each run records, on its first activity, what memory it started from (definition
hash, pipeline key, each mounted store's mode and snapshot id), once; ``memory
manifest`` shows it and ``memory readers`` finds every run that started while a given
version of a file was current."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._cli import main
from lw_temporal.memory import StoreKind, StoreRef
from lw_temporal.memory._manifest import manifests_dir, read_manifest

from ._memory_support import call, memory_harness

STORE = StoreRef(StoreKind.WORKFLOW, "notes")
LESSONS = "/mnt/memory/workflow/lessons.md"


async def test_manifests_record_the_memory_a_run_started_from(
    dev_env: WorkflowEnvironment,
    data_dir: Path,
    task_queue: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    definition = WorkflowDefinition(id="notes")
    plugin = LittleWorkflowPlugin(data_dir, [definition])
    first, second, third = (f"run_notes@{task_queue}-{i}" for i in range(3))
    async with memory_harness(dev_env, plugin, task_queue) as run:
        await run(first, call("lw.memory.write", path=LESSONS, content="bad lesson\n"))
        await run(
            second, call("lw.memory.read", path=LESSONS), call("lw.memory.read", path=LESSONS)
        )
        await run(third, call("lw.memory.write", path=LESSONS, content="good lesson\n"))
    bad = plugin.memory.versions(STORE, "lessons.md")[0].sha256

    manifest = read_manifest(plugin.config.layout, second)
    assert manifest is not None and manifest.role == "planner"
    assert manifest.definition_hash == definition.definition_hash
    [mounted] = [s for s in manifest.stores if s.store == str(STORE)]
    assert mounted.mode == "rw" and mounted.mount == "/mnt/memory/workflow"
    first_manifest = read_manifest(plugin.config.layout, first)
    assert first_manifest is not None
    assert mounted.snapshot_id != first_manifest.stores[0].snapshot_id  # the store changed
    assert len(list(manifests_dir(plugin.config.layout).glob("*.json"))) == 3  # once per run

    code = await asyncio.to_thread(
        main, ["memory", "manifest", "--data-dir", str(data_dir), second]
    )
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    assert mounted.snapshot_id is not None
    assert definition.definition_hash in out and mounted.snapshot_id in out
    assert "/mnt/memory/workflow/ (rw)" in out

    argv = ["memory", "readers", "--data-dir", str(data_dir), "workflow:notes", "lessons.md"]
    code = await asyncio.to_thread(main, [*argv, bad[:12]])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    listed = [line.split()[1] for line in out.splitlines()]
    assert listed == [second, third]  # started while the bad lesson was current

    code = await asyncio.to_thread(
        main, ["memory", "manifest", "--data-dir", str(data_dir), "run_notes@nope"]
    )
    _out, err = capsys.readouterr()
    assert code == 1 and "no run manifest" in err
    json.loads(next(manifests_dir(plugin.config.layout).glob("*.json")).read_text())
