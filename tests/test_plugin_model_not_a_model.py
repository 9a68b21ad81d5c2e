"""A model that is not one is refused where it is given, naming what was given and the
fix: ``LittleWorkflowPlugin(model=sample_model)`` (the factory, not what it makes), a
class, a string; and ``lw-temporal worker --model module:attr`` naming a value that is
no Model, a factory that fails or one that returns no Model stops with exit status 2
and one line. Before, the plugin took any of them and every run failed at its first
turn, once per retry, and the worker said ``TypeError: 'str' object is not callable``
or started serving with a class as its model."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from lw_temporal import LittleWorkflowPlugin
from lw_temporal.testing import ScriptedModel
from workflows.pipeline import DEFINITIONS, sample_model

from ._live_support import CLI, ROOT


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (sample_model, "not the function sample_model (call it: model=sample_model())"),
        (ScriptedModel, "not the class ScriptedModel (call it: model=ScriptedModel(...))"),
        (
            "anthropic:claude-sonnet-4-6",
            "not a str (lw_temporal.models.model_from_spec builds one from 'provider:model')",
        ),
        (3, "not an int"),
    ],
)
def test_the_plugin_refuses_what_is_not_a_model(
    tmp_path: Path, model: object, expected: str
) -> None:
    with pytest.raises(TypeError, match="model= takes a Model") as caught:
        LittleWorkflowPlugin(tmp_path, DEFINITIONS, model=model)  # type: ignore[arg-type]
    assert str(caught.value).endswith(expected), caught.value
    assert not any(tmp_path.iterdir()), "nothing is made before the model is checked"


def test_the_plugin_takes_a_model_or_none(tmp_path: Path) -> None:
    LittleWorkflowPlugin(tmp_path / "a", DEFINITIONS, model=sample_model())
    LittleWorkflowPlugin(tmp_path / "b", DEFINITIONS)


MODULE = """\
from workflows.pipeline import sample_model

NOT_A_MODEL = "claude"
def fails():
    raise RuntimeError("no scripts here")
def returns_text():
    return "claude"
"""


@pytest.mark.parametrize(
    ("attribute", "expected"),
    [
        ("NOT_A_MODEL", "--model models_x:NOT_A_MODEL is a str, not a Model"),
        ("fails", "--model models_x:fails: calling it failed: RuntimeError: no scripts here"),
        ("returns_text", "--model models_x:returns_text returned a str, not a Model"),
    ],
)
def test_the_worker_refuses_a_model_option_that_is_no_model(
    tmp_path: Path, attribute: str, expected: str
) -> None:
    (tmp_path / "models_x.py").write_text(MODULE)
    data = tmp_path / "data"
    data.mkdir()
    done = subprocess.run(
        [CLI, "worker", "--data-dir", str(data), "--definitions", "workflows.pipeline:DEFINITIONS",
         "--model", f"models_x:{attribute}", "--sandbox", "unsandboxed-dangerous",
         "--address", "localhost:1"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": f"{tmp_path}:{ROOT}"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("lw-temporal worker: " + expected), lines[0]
