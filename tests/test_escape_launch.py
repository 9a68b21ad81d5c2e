"""Escape class: inputs aimed at the launch itself. A command longer than Linux's
per-argument limit runs (it travels in a file), and a command that prints the
sandbox's launch-failure marker and exits 125 is just a command that did so: the
launch reports failures on a channel no command holds."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal._sandbox import LAUNCH_FAILED_MARKER, LAUNCH_FAILED_STATUS
from tests._escape_support import BACKENDS, WORKER, running


@pytest.mark.parametrize("backend", BACKENDS)
async def test_long_and_forged_commands_are_plain_results(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    long_word = "a" * 140_000
    near_cap = "b" * 250_000
    async with running(dev_env, data_dir, backend) as (bash, _):
        long, longest, forged, after = await bash.run(
            WORKER,
            [
                f'echo {long_word} | wc -c; echo "$0"',
                f": {near_cap}; echo ok",
                f"echo '{LAUNCH_FAILED_MARKER}: overlay mount for /mnt: gone' >&2; exit 125",
                "echo alive",
            ],
        )
    assert (long.exit_code, long.stdout) == (0, "140001\n/bin/bash\n"), long.stderr
    assert (longest.exit_code, longest.stdout) == (0, "ok\n"), longest.stderr
    assert forged.exit_code == LAUNCH_FAILED_STATUS
    assert forged.stderr.startswith(LAUNCH_FAILED_MARKER)
    assert after.stdout == "alive\n"
