"""An ID started as the wrong workflow type is refused in plain English: "is an
orchestrator ID", "use an orchestrator ID" (it said "is a orchestrator ID")."""

from __future__ import annotations

import pytest

from lw_temporal.ids import InvalidWorkflowId, parse_workflow_id_for_type


def test_the_refusal_names_both_roles_with_their_article() -> None:
    with pytest.raises(InvalidWorkflowId) as caught:
        parse_workflow_id_for_type("pipeline_x", "lw.Planner")
    assert str(caught.value) == (
        "workflow ID 'pipeline_x' is an orchestrator ID but runs as lw.Planner; start it "
        "as lw.Orchestrator or use a planner ID"
    )
    with pytest.raises(InvalidWorkflowId) as caught:
        parse_workflow_id_for_type("run_x@1", "lw.Orchestrator")
    assert str(caught.value).endswith(
        "is a planner ID but runs as lw.Orchestrator; start it "
        "as lw.Planner or use an orchestrator ID"
    )
