"""A rule on bash commands, end to end through the command line: the planner's matching
command waits (``status`` and ``approvals list`` show it), survives its worker being
SIGKILLed, and after ``approvals approve`` runs exactly once; a denial reaches the
model as the call's result; an unknown request, a repeated decision and a decider the
rule does not accept are refused."""

from __future__ import annotations

from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentResult, LittleWorkflowPlugin
from lw_temporal.ids import DataLayout
from lw_temporal.testing import plugin_client

from ._approvals_support import DEFINITIONS, kill, lw, until_listed, worker


def _client(env: WorkflowEnvironment, data_dir: Path) -> Client:
    return plugin_client(env.client, LittleWorkflowPlugin(data_dir, DEFINITIONS))


async def _bash_attempts(client: Client, workflow_id: str) -> list[int]:
    """The attempt of every lw.bash activity task the run started."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    bash = {
        e.event_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == "lw.bash"
    }
    return [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and e.activity_task_started_event_attributes.scheduled_event_id in bash
    ]


async def test_an_approved_command_waits_through_a_restart_and_runs_once(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    workflow_id = f"run_deployer@{task_queue}"
    scratch = DataLayout.at(data_dir).runs / workflow_id / "scratch"
    client = _client(dev_env, data_dir)
    async with worker(dev_env, data_dir, task_queue) as first:
        handle = await client.start_workflow(
            "lw.Planner", "Deploy.", id=workflow_id, task_queue=task_queue, result_type=AgentResult
        )
        [line] = await until_listed(dev_env, workflow_id)
        a1 = line.split("  ")[1]
        assert a1.startswith("a1-"), line  # numbered, with a tag of its own (never reused)
        assert line.split("  ")[:4] == [workflow_id, a1, "bash", "planner deployer"], line
        assert "deny at " in line
        assert line.endswith("echo deploy >> /mnt/scratch/own/deploy.log && echo deployed"), line
        # The call before it ran; the matching one has not.
        assert (scratch / "steps.log").read_text() == "prepared\n"
        assert not (scratch / "deploy.log").exists()
        code, out, err = await lw(dev_env, "status", workflow_id)
        assert code == 0, err
        assert f"waiting for approval (bash {a1})" in out, out
        kill(first)
        await first.wait()

    async with worker(dev_env, data_dir, task_queue):
        [line] = await until_listed(dev_env, workflow_id)  # still waiting, on a new worker
        code, out, err = await lw(
            dev_env, "approvals", "approve", workflow_id, "a9", "--by", "carol"
        )
        assert code == 1
        assert f"no approval request a9 in {workflow_id} (pending: {a1};" in err, err
        code, out, err = await lw(
            dev_env, "approvals", "approve", workflow_id, a1, "--by", "carol", "--why", "go"
        )
        assert code == 0, err
        assert out.startswith(f"{workflow_id}  {a1}  approved by carol"), out
        result = await handle.result()
    assert "deployed" in result.summary
    assert (scratch / "deploy.log").read_text() == "deploy\n"
    # Each command ran in one attempt: the approved one is never retried.
    assert await _bash_attempts(client, workflow_id) == [1, 1]
    code, out, err = await lw(dev_env, "approvals", "list", "--workflow", workflow_id)
    assert code == 0 and out == "", (out, err)


async def test_a_denial_is_the_models_tool_result_and_repeats_are_refused(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    workflow_id = f"run_gated@{task_queue}"
    client = _client(dev_env, data_dir)
    async with worker(dev_env, data_dir, task_queue):
        handle = await client.start_workflow(
            "lw.Planner", "Deploy.", id=workflow_id, task_queue=task_queue, result_type=AgentResult
        )
        lines = await until_listed(dev_env, workflow_id, count=2)
        a1, a2 = (line.split("  ")[1] for line in lines)
        assert (a1[:3], a2[:3]) == ("a1-", "a2-"), lines
        assert "\x1b" not in lines[0] and lines[0].endswith("# \\x1b[2K"), lines[0]
        code, out, err = await lw(
            dev_env, "approvals", "deny", workflow_id, a1, "--by", "dana", "--why", "not today"
        )
        assert code == 0, err
        for by in ("carol", "dana"):
            code, out, err = await lw(
                dev_env, "approvals", "deny", workflow_id, a1, "--by", by, "--why", "again"
            )
            assert code == 1
            assert "already decided: denied by dana" in err, err
        code, out, err = await lw(dev_env, "approvals", "approve", workflow_id, a2, "--by", "eve")
        assert code == 1
        assert f"eve may not decide approval {a2}" in err and "carol, dana only" in err, err
        code, out, err = await lw(dev_env, "approvals", "approve", workflow_id, a2, "--by", "carol")
        assert code == 0, err
        result = await handle.result()
        code, out, err = await lw(
            dev_env,
            "approvals",
            "list",
            "--all",
            "--workflow",
            workflow_id,
            "--data-dir",
            str(data_dir),
        )
    told = result.summary.split(" | ")
    assert told[0].startswith(f"bash: not run: a person (dana) denied this call (approval {a1}")
    assert told[0].endswith(": not today")
    assert told[1].startswith("exit code 0")
    scratch = DataLayout.at(data_dir).runs / workflow_id / "scratch"
    assert (scratch / "deploy.log").read_text() == "deploy two\n"
    assert code == 0, err
    decided = out.splitlines()
    assert len(decided) == 2, out
    assert decided[0].startswith(f"{workflow_id}  {a1}  bash  planner gated  denied by dana at ")
    assert ": not today  echo deploy one" in decided[0]
    assert decided[1].startswith(f"{workflow_id}  {a2}  bash  planner gated  approved by carol at ")
