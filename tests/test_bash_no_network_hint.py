"""An agent without a network policy that reaches for the network is told it has no
network, on both backends: curl, ssh and Python said only that a name did not
resolve, which reads like a flaky resolver (an agent retries). A failure that is not
about the network gets no such hint."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._bash_parts import NO_NETWORK_HINT
from tests._bash_support import SANDBOXES, bash_worker

PLANNER = "run_cr@offline"
COMMANDS = [
    ("curl", "curl -sS -m 5 https://example.com -o /dev/null"),
    (
        "python3",
        "python3 -c 'import urllib.request; urllib.request.urlopen(\"http://example.com\")'",
    ),
    ("ssh", "ssh -o BatchMode=yes -o ConnectTimeout=5 git@example.com true"),
]


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_no_network_says_so(
    dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str
) -> None:
    commands = [command for program, command in COMMANDS if shutil.which(program)]
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")], sandbox=sandbox)
    async with bash_worker(dev_env, plugin) as bash:
        results = await bash.run(PLANNER, [*commands, "ls no-such-file"])
    *offline, unrelated = results
    assert len(offline) >= 2, "python3 and curl are there wherever the tests run"
    for command, result in zip(commands, offline, strict=True):
        assert result.exit_code != 0, (command, result)
        assert result.hint is not None and NO_NETWORK_HINT in result.hint, (command, result)
        assert result.stderr.endswith(f"lw.bash: {result.hint}\n"), (command, result.stderr)
    assert unrelated.exit_code != 0 and unrelated.hint is None, unrelated
