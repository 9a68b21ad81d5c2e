"""A ``--definitions`` module with a mistake in it stops the worker before anything else
with exit status 2 and one line that names the module and what is wrong: a syntax error
(with its file and line), an exception the module raises, a definition pydantic refuses
(its field and reason, not pydantic's report), and an attribute that is not a list.
No server is needed: nothing connects before the definitions load."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ._live_support import CLI, ROOT

MODULES = {
    "defs_syntax": "DEFS = [\n",
    "defs_raises": "raise RuntimeError('the vault is sealed')\n",
    "defs_invalid": (
        "from lw_temporal import WorkflowDefinition\nDEFS = [WorkflowDefinition(id='Bad Id')]\n"
    ),
    "defs_not_a_list": "DEFS = 3\n",
}


@pytest.mark.parametrize(
    ("module", "expected"),
    [
        ("defs_syntax", "cannot import 'defs_syntax': '[' was never closed ("),
        ("defs_raises", "importing 'defs_raises' (for defs_raises:DEFS) failed: RuntimeError: "
         "the vault is sealed (--debug shows the traceback)"),
        ("defs_invalid", "importing 'defs_invalid' (for defs_invalid:DEFS) failed: id: Value "
         "error, definition id 'Bad Id' is not valid: "),
        ("defs_not_a_list", "--definitions defs_not_a_list:DEFS is a int, not a list of "
         "WorkflowDefinition objects"),
    ],
)  # fmt: skip
def test_a_broken_definitions_module_is_one_line_naming_it(
    tmp_path: Path, module: str, expected: str
) -> None:
    (tmp_path / f"{module}.py").write_text(MODULES[module])
    data = tmp_path / "data"
    data.mkdir()
    done = subprocess.run(
        [CLI, "worker", "--data-dir", str(data), "--definitions", f"{module}:DEFS",
         "--no-model", "--sandbox", "unsandboxed-dangerous", "--address", "localhost:1"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": f"{tmp_path}:{ROOT}"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("lw-temporal worker: " + expected), lines[0]
    assert "Traceback" not in done.stderr
