"""A stream's part in the result is bounded by what it takes in the result's JSON, not
by the bytes read: a control character is six bytes there (``\\u0001``) and a byte that
is not UTF-8 five (``\\\\xff``), so 64 KiB of either used to put 320-384 KiB of one
command's output into the workflow history. A character JSON writes as two (a newline,
a quote) counts one, so text keeps its whole cap and nothing takes more than twice it.
What does not fit is saved whole, as a stream longer than the cap is, and the result
says it was cut."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from tests._bash_support import SANDBOXES, bash_worker, saved_file

PLANNER = "run_jb@json-bounded"
CAP = 64 * 1024
#: What one stream's field may add around the cap (its name and quotes).
SLACK = 64


def _write(payload: str, stream: str = "stdout") -> str:
    return f"python3 -c 'import sys; sys.{stream}.buffer.write({payload})'"


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_escaped_output_stays_within_the_cap_and_is_saved_whole(
    dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="jb")], sandbox=sandbox)
    control = 'b"\\x01" * 65536'
    invalid = 'b"\\xff" * 30000'  # fewer bytes than the cap, five times more in JSON
    quotes = 'b"\\x22\\x5c" * 20000 + b"\\x01" * 3'  # 40 KB, 80 KB in JSON: not cut
    async with bash_worker(dev_env, plugin) as bash:
        results = await bash.run(
            PLANNER,
            [
                _write(control), _write(invalid, "stderr"), _write(quotes), "echo small",
                "yes | head -c 65536",
            ],
        )  # fmt: skip
    scratch = plugin.config.scope_of(PLANNER, "lw.Planner").own_scratch
    out, err, both, small, lines = results
    for result in results:
        payload = pydantic_data_converter.payload_converter.to_payloads([result])[0].data
        fields = json.loads(payload)
        for name in ("stdout", "stderr"):
            shown = len(json.dumps(fields[name], ensure_ascii=False).encode())
            assert shown <= 2 * CAP + SLACK, (name, shown)
    escaped = len(json.dumps(out.stdout).encode())
    assert escaped <= CAP + SLACK, escaped
    assert out.stdout_truncated and out.stdout == "\x01" * len(out.stdout)
    assert len(out.stdout) >= CAP // 6 - 1
    assert saved_file(scratch, out.stdout_ref).read_bytes() == b"\x01" * 65536
    assert err.stderr_truncated and err.stderr.startswith("\\xff" * 100)
    assert err.stderr_ref is not None
    assert saved_file(scratch, err.stderr_ref).read_bytes() == b"\xff" * 30000
    assert not both.stdout_truncated and both.stdout == '"\\' * 20000 + "\x01" * 3
    assert not small.stdout_truncated and small.stdout == "small\n" and small.stdout_ref is None
    assert not lines.stdout_truncated and lines.stdout == "y\n" * (CAP // 2)  # the whole cap
