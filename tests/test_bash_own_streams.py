"""A command can write to its own streams by name, on both backends: ``> /dev/stderr``,
``tee /dev/stdout``, ``/proc/self/fd/1`` and a program opening ``/dev/stdout``. Under
Landlock with a root worker each of them failed with "Permission denied" and its
output was lost: the output pipes were made by the worker as root (mode 0600), and
reopening a pipe by name is checked like opening a file. Under bwrap the launch made
them as the agent's user."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from tests._bash_support import SANDBOXES, bash_worker

PLANNER = "run_cr@own-streams"
COMMAND = (
    "echo a > /dev/stdout; echo b > /dev/stderr; echo c | tee /dev/stderr >/dev/null; "
    "echo d > /proc/self/fd/1; echo e > /dev/fd/2; "
    'python3 -c \'open("/dev/stdout", "w").write("f\\n")\''
)


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_a_command_writes_its_streams_by_name(
    dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")], sandbox=sandbox)
    async with bash_worker(dev_env, plugin) as bash:
        result = await bash.one(PLANNER, COMMAND)
    assert (result.exit_code, result.stdout, result.stderr) == (0, "a\nd\nf\n", "b\nc\ne\n"), result
