"""A stream longer than the cap whose last kept bytes are the start of a UTF-8
character ends the result without them: the result's ``stdout`` ended in ``\\xc3``,
bytes the command never printed as such (the character is whole in the saved file).
Bytes that are not UTF-8 at all still show as ``\\xNN``, cut or not."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from tests._bash_support import SANDBOXES, bash_worker, saved_file

PLANNER = "run_cr@cut-character"
CAP = 64 * 1024


def _write(payload: str, stream: str = "stdout") -> str:
    return f"python3 -c 'import sys; sys.{stream}.buffer.write({payload})'"


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_a_character_cut_at_the_cap_is_left_out(
    dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")], sandbox=sandbox)
    cut = f'b"a" * {CAP - 1} + "é".encode() + b"tail"'
    # a byte that is not UTF-8 counts four toward the cap (test_bash_result_json_bounded)
    invalid = f'b"a" * {CAP - 4} + b"\\xff" + b"tail"'
    async with bash_worker(dev_env, plugin) as bash:
        out, err, bad = await bash.run(
            PLANNER, [_write(cut), _write(cut, "stderr"), _write(invalid)]
        )
    assert out.stdout_truncated and out.stdout_bytes == CAP + 5
    assert out.stdout == "a" * (CAP - 1), out.stdout[-8:]
    scratch = plugin.config.scope_of(PLANNER, "lw.Planner").own_scratch
    saved = saved_file(scratch, out.stdout_ref).read_bytes()
    assert saved == b"a" * (CAP - 1) + "é".encode() + b"tail"
    assert err.stderr_truncated and err.stderr == "a" * (CAP - 1), err.stderr[-80:]
    assert bad.stdout_truncated and bad.stdout == "a" * (CAP - 4) + "\\xff"
