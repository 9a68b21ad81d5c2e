"""Escape class: the OOM killer's choice. Every command starts at ``oom_score_adj``
1000 (the killer's first choice); the worker raises it from a thread running as the
agent, which sets no floor, so under bwrap, whose ``/proc`` was writable, a command
wrote its own score back down (tried: 1000 to 0). ``/proc`` is read-only on both
backends now: through the real ``lw.bash``, a program's write of the score (its own,
its parent's) is refused and the score stays 1000, while the command's own streams
by name (``/dev/stdout``, ``/proc/self/fd/1``), which go through ``/proc``, still work."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests._escape_support import BACKENDS, WORKER, running, shell_quote

LOWER = """import errno, os
for pid in ('self', str(os.getppid())):
    for value in ('0', '-1000', '999'):
        try:
            with open(f'/proc/{pid}/oom_score_adj', 'w') as f:
                f.write(value)
            print('wrote', pid, value)
        except OSError as e:
            print('refused', pid, value, errno.errorcode[e.errno])
print('score', open('/proc/self/oom_score_adj').read().strip())
"""


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_command_cannot_lower_its_oom_score(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    async with running(dev_env, data_dir, backend) as (bash, _):
        lowered, streams = await bash.run(
            WORKER,
            [
                f"python3 -c {shell_quote(LOWER)}",
                "echo a > /dev/stdout; echo b > /proc/self/fd/1; tee /dev/stderr <<< c",
            ],
        )
    assert "wrote" not in lowered.stdout, lowered.stdout
    assert lowered.stdout.splitlines()[-1] == "score 1000", lowered.stdout
    assert (streams.stdout, streams.stderr) == ("a\nb\nc\n", "c\n"), streams
