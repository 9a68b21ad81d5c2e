"""With tracing on, a sample pipeline is one trace: a span for the client's start, each
agent run (role and definition), every model turn and every command, and no span
attribute holds a command's output or a file's content."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan
from temporalio.testing import WorkflowEnvironment

from lw_temporal.ids import parse_workflow_id

from ._telemetry_support import run_sample_pipeline
from .conftest import Traces


def _attribute_text(span: ReadableSpan) -> list[tuple[str, str]]:
    values: list[tuple[str, str]] = []
    for key, value in (span.attributes or {}).items():
        if isinstance(value, str):
            values.append((key, value))
        elif isinstance(value, tuple | list):
            values += [(key, str(v)) for v in value]
    return values


async def test_a_traced_pipeline_is_one_trace_of_every_agent_turn_and_command(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str, traces: Traces
) -> None:
    run = await run_sample_pipeline(dev_env, data_dir, task_queue, tracing=traces.provider)
    spans = [s for s in traces.finished() if s.context is not None]

    # One trace, rooted at the client's start of the orchestrator.
    assert {s.context.trace_id for s in spans if s.context} == {
        spans[0].context.trace_id if spans[0].context else 0
    }
    roots = [s for s in spans if s.parent is None]
    assert [s.name for s in roots] == ["StartWorkflow:lw.Orchestrator"]

    # Temporal's own spans (start, run, activity and child starts) carry the labels too.
    temporal = [s for s in spans if "temporalWorkflowID" in (s.attributes or {})]
    assert {s.name.split(":")[0] for s in temporal} >= {
        "StartWorkflow",
        "RunWorkflow",
        "StartActivity",
        "StartChildWorkflow",
        "RunActivity",
    }
    for span in temporal:
        attributes = span.attributes or {}
        agent_id = parse_workflow_id(str(attributes["temporalWorkflowID"]))
        assert attributes["lw.role"] == agent_id.role.value, span.name
        assert attributes.get("lw.definition_id") == agent_id.definition_id, span.name

    # One agent span per workflow of the tree, with its role and definition.
    agent_spans = {
        str((s.attributes or {})["lw.workflow_id"]): s
        for s in spans
        if s.name.startswith("lw.") and (s.attributes or {}).get("lw.activity") is None
    }
    assert sorted(agent_spans) == sorted(run.workflow_ids)
    for workflow_id, span in agent_spans.items():
        agent_id = parse_workflow_id(workflow_id)
        attributes = span.attributes or {}
        assert attributes["lw.role"] == agent_id.role.value
        assert attributes.get("lw.definition_id") == agent_id.definition_id
    roles = Counter(str((s.attributes or {})["lw.role"]) for s in agent_spans.values())
    assert roles == {"orchestrator": 1, "planner": 2, "worker": roles["worker"]}
    assert roles["worker"] >= 2

    # Every model turn and every command of every workflow has its span, labelled.
    for activity_type in ("lw.model", "lw.bash", "lw.memory.append"):
        ran = Counter(a.workflow_id for a in run.of_type(activity_type))
        traced = Counter(
            str((s.attributes or {})["lw.workflow_id"]) for s in spans if s.name == activity_type
        )
        assert ran and traced == ran, activity_type
    for span in spans:
        if span.name in ("lw.model", "lw.bash") or span.name.startswith("lw.memory."):
            attributes = span.attributes or {}
            assert attributes["lw.role"] in ("orchestrator", "planner", "worker")
            assert "lw.workflow_id" in attributes
            assert span.parent is not None
    bash = [s for s in spans if s.name == "lw.bash"]
    for span in bash:
        attributes = span.attributes or {}
        assert len(str(attributes["lw.bash.command_sha256"])) == 64
        assert "lw.bash.command" not in attributes
        assert attributes["lw.bash.exit_code"] == 0
        assert str(attributes["lw.bash.sandbox"]).startswith("bwrap")
    assert any((s.attributes or {}).get("lw.bash.stdout_bytes") for s in bash)
    memory = [s for s in spans if s.name == "lw.memory.append"]
    assert all(len(str((s.attributes or {})["lw.memory.sha256"])) == 64 for s in memory)

    # Nothing the agents saw or wrote is in a span: no output, no content, no command.
    secrets_of_the_run: list[str] = []
    for activity in run.of_type("lw.bash"):
        secrets_of_the_run.append(activity.arguments["command"])
        for stream in ("stdout", "stderr"):
            text = activity.result[stream]
            secrets_of_the_run += [line for line in text.splitlines() if len(line.strip()) >= 6]
    for activity in run.activities:
        if activity.activity_type.startswith("lw.memory.") and activity.arguments:
            content = activity.arguments.get("content")
            if content:
                secrets_of_the_run.append(content.strip())
    assert len(secrets_of_the_run) > 10
    for span in spans:
        for key, text in _attribute_text(span):
            for secret in secrets_of_the_run:
                # A listing names files: a memory span names the file it touched.
                if key == "lw.memory.path" and not any(c.isspace() for c in secret):
                    continue
                assert secret not in text, (span.name, key, secret)
