"""The workflow-ID grammar of DESIGN section 2: every rule, and property tests that
every accepted ID is a path strictly inside ``<dataDir>/runs/`` and round-trips."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lw_temporal import Role
from lw_temporal.ids import (
    DEFINITION_ID_PATTERN,
    MAX_WORKFLOW_ID_LENGTH,
    TOKEN_PATTERN,
    AgentId,
    DataLayout,
    InvalidWorkflowId,
    parse_workflow_id,
    parse_workflow_id_for_type,
)

tokens = st.from_regex(TOKEN_PATTERN, fullmatch=True)
definition_ids = st.from_regex(DEFINITION_ID_PATTERN, fullmatch=True)


@st.composite
def run_ids(draw: st.DrawFn) -> AgentId:
    kind = draw(st.sampled_from(["orchestrator", "planner", "sub-run", "step", "pipeline-step"]))
    if kind == "orchestrator":
        return AgentId.orchestrator(draw(tokens))
    pipeline = draw(tokens) if kind in ("sub-run", "pipeline-step") else None
    planner = AgentId.planner(draw(definition_ids), draw(tokens), pipeline=pipeline)
    if kind in ("step", "pipeline-step"):
        return planner.step_run(draw(tokens))
    return planner


@pytest.mark.parametrize(
    ("workflow_id", "role", "definition_id"),
    [
        ("pipeline_7f3a", Role.ORCHESTRATOR, None),
        ("pipeline_7f3a/sub-runs/run_candidate-review@1", Role.PLANNER, "candidate-review"),
        ("run_candidate-review@2026-11-30.a", Role.PLANNER, "candidate-review"),
        ("run_candidate-review@2026-11-30.a/steps/step_3", Role.WORKER, "candidate-review"),
        (
            "pipeline_x/sub-runs/run_candidate.review@b_2/steps/step_z",
            Role.WORKER,
            "candidate.review",
        ),
        ("dream_candidate-review@sched-2026-11-30T05:00:00Z", Role.DREAMING, "candidate-review"),
    ],
)
def test_design_examples_parse_to_their_role_and_definition(
    workflow_id: str, role: Role, definition_id: str | None
) -> None:
    agent_id = parse_workflow_id(workflow_id)
    assert agent_id.role is role
    assert agent_id.definition_id == definition_id
    assert str(agent_id) == workflow_id


@pytest.mark.parametrize(
    ("workflow_id", "reason"),
    [
        ("", "empty"),
        ("pipeline_a/../b", "'..'"),
        ("pipeline_a/./sub-runs/run_x@1", "'.'"),
        ("pipeline_a//sub-runs/run_x@1", "empty"),
        ("/pipeline_a", "empty"),
        ("pipeline_a/", "empty"),
        ("pipeline_a\x00", "NUL"),
        ("pipeline_", "token"),
        ("pipeline_-x", "token"),
        ("pipeline_a b", "token"),
        ("pipeline_" + "a" * 65, "token"),
        ("run_Candidate@1", "definition id"),
        ("run_" + "a" * 64 + "@1", "definition id"),
        ("run_review", "run_<definition id>@<token>"),
        ("run_review@", "token"),
        ("run_@1", "definition id"),
        ("pipeline_a/run_x@1", "expected"),
        ("pipeline_a/sub-runs", "expected"),
        ("pipeline_a/sub-runs/step_1", "expected"),
        ("run_x@1/steps", "expected"),
        ("run_x@1/steps/step_1/steps/step_2", "expected"),
        ("run_x@1/step/step_1", "expected"),
        ("step_1", "expected"),
        ("something-else", "expected"),
        ("a" * (MAX_WORKFLOW_ID_LENGTH + 1), "limit"),
    ],
)
def test_malformed_ids_are_refused_with_a_reason(workflow_id: str, reason: str) -> None:
    with pytest.raises(InvalidWorkflowId, match=None) as err:
        parse_workflow_id(workflow_id)
    assert reason in str(err.value)


@pytest.mark.parametrize(
    ("workflow_id", "workflow_type"),
    [
        ("pipeline_a", "lw.Planner"),
        ("run_x@1", "lw.Worker"),
        ("run_x@1/steps/step_1", "lw.Planner"),
        ("pipeline_a/sub-runs/run_x@1", "lw.Orchestrator"),
        ("run_x@1", "SomethingElse"),
    ],
)
def test_a_role_that_does_not_match_the_workflow_type_is_refused(
    workflow_id: str, workflow_type: str
) -> None:
    with pytest.raises(InvalidWorkflowId):
        parse_workflow_id_for_type(workflow_id, workflow_type)


def test_children_and_parents_follow_the_grammar() -> None:
    orchestrator = AgentId.orchestrator("p1")
    planner = orchestrator.sub_run("candidate-review", "1")
    step = planner.step_run("3")
    assert str(planner) == "pipeline_p1/sub-runs/run_candidate-review@1"
    assert str(step) == "pipeline_p1/sub-runs/run_candidate-review@1/steps/step_3"
    assert step.parent == planner and planner.parent == orchestrator
    assert step.is_child_of(planner) and not step.is_child_of(orchestrator)
    assert orchestrator.parent is None and AgentId.planner("x", "1").parent is None
    with pytest.raises(InvalidWorkflowId):
        planner.sub_run("x", "1")
    with pytest.raises(InvalidWorkflowId):
        orchestrator.step_run("1")


@given(run_ids())
def test_format_then_parse_round_trips(agent_id: AgentId) -> None:
    assert parse_workflow_id(str(agent_id)) == agent_id
    assert parse_workflow_id_for_type(str(agent_id), agent_id.workflow_type) == agent_id


@given(run_ids())
def test_every_accepted_id_is_a_path_strictly_inside_runs(agent_id: AgentId) -> None:
    layout = DataLayout.at("/srv/lw")
    run_dir = layout.run_dir(agent_id)
    normalized = Path(os.path.normpath(run_dir))
    assert normalized == run_dir
    assert layout.runs in normalized.parents
    assert layout.scratch(agent_id).parent == run_dir


@given(st.text(max_size=120))
def test_arbitrary_text_either_parses_inside_runs_or_is_refused(text: str) -> None:
    try:
        agent_id = parse_workflow_id(text)
    except InvalidWorkflowId:
        return
    layout = DataLayout.at("/srv/lw")
    assert str(agent_id) == text
    assert layout.runs in Path(os.path.normpath(layout.run_dir(agent_id))).parents
