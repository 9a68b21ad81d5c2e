"""Under Landlock a program's own write to writable memory fails and gets the hint to
use ``lw.memory.*``, whether the store exists yet or not. A store that does not exist
yet is shown as an empty folder of the worker's, and the hint looked for the store's
own path in the error: a fresh definition's first writes got "Permission denied" and
no word on why."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._pathcheck import NO_STAGED_MEMORY
from lw_temporal._sandbox import landlock_abi
from tests._bash_support import bash_worker

WRITE = (
    'python3 -c \'import sys; open(sys.argv[1] + "/note.md", "a").write("x")\' /mnt/memory/workflow'
)


@pytest.mark.skipif(landlock_abi() < 6, reason="needs Landlock ABI 6+")
async def test_a_programs_memory_write_is_hinted_with_or_without_its_store(
    dev_env: WorkflowEnvironment, data_dir: Path
) -> None:
    definitions = [WorkflowDefinition(id="fresh"), WorkflowDefinition(id="kept")]
    plugin = LittleWorkflowPlugin(data_dir, definitions, sandbox="landlock")
    (plugin.config.layout.root / "memory" / "workflows" / "kept").mkdir(parents=True)
    async with bash_worker(dev_env, plugin) as bash:
        fresh = await bash.one("run_fresh@1", WRITE)
        kept = await bash.one("run_kept@1", WRITE)
    for result in (fresh, kept):
        assert result.exit_code != 0 and "Permission denied" in result.stderr, result
        assert result.hint == NO_STAGED_MEMORY, result
        assert result.stderr.endswith(f"lw.bash: {NO_STAGED_MEMORY}\n"), result.stderr
