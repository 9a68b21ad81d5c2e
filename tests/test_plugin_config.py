"""The plugin's worker-side configuration turns bad IDs into typed, non-retryable errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal.errors import INVALID_WORKFLOW_ID, UNKNOWN_DEFINITION


def plugin(tmp_path: Path) -> LittleWorkflowPlugin:
    return LittleWorkflowPlugin(tmp_path, [WorkflowDefinition(id="candidate-review")])


def test_data_dir_is_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert LittleWorkflowPlugin("rel", []).data_dir == tmp_path / "rel"


@pytest.mark.parametrize(
    ("workflow_id", "workflow_type"),
    [("pipeline_a/../b", "lw.Orchestrator"), ("run_candidate-review@1", "lw.Worker")],
)
def test_bad_ids_are_typed_non_retryable(
    tmp_path: Path, workflow_id: str, workflow_type: str
) -> None:
    with pytest.raises(ApplicationError) as err:
        plugin(tmp_path).config.scope_of(workflow_id, workflow_type)
    assert err.value.type == INVALID_WORKFLOW_ID and err.value.non_retryable


def test_unknown_definition_says_how_to_register_it(tmp_path: Path) -> None:
    with pytest.raises(ApplicationError) as err:
        plugin(tmp_path).config.scope_of("run_invoice@1", "lw.Planner")
    assert err.value.type == UNKNOWN_DEFINITION and err.value.non_retryable
    assert "LittleWorkflowPlugin(definitions=" in str(err.value)
    assert "run_invoice@1" in str(err.value)
