"""Durable waiting in the agent loop: a request left alone is decided by its rule's
timeout; requests of later turns keep counting after continue-as-new, their decisions
carried; a rule on memory writes asks about the memory tool and keeps bash out; a rule
on sub-runs asks only beyond the number it allows, and the children of one reply start
together once all of them are decided."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, ApprovalRule, ModelRequest, Role, ToolCall
from lw_temporal import WorkflowDefinition as Definition
from lw_temporal._approvals import ApprovalRequest
from lw_temporal._approvals._client import decide, list_approvals
from lw_temporal._approvals._records import REQUESTS_PER_REPLY
from lw_temporal.ids import PROGRESS_QUERY, DataLayout, Progress
from lw_temporal.testing import ScriptedModel, running_worker, tool

from ._approvals_support import DEFINITIONS as SHARED
from ._approvals_support import MODEL as SHARED_MODEL


def _told(request: ModelRequest) -> list[ToolCall]:
    return [tool("finish", summary=" | ".join(r.text for r in request.last_results()))]


async def _pending(client: Client, workflow_id: str, count: int = 1) -> list[ApprovalRequest]:
    for _ in range(600):
        listing = await list_approvals(client, workflow_id=workflow_id)
        if len(listing.pending) >= count:
            return listing.pending
        await asyncio.sleep(0.1)
    raise AssertionError(f"{workflow_id} never had {count} pending requests")


async def test_a_request_nobody_decides_times_out_as_its_rule_says(
    ts_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    definitions = [
        Definition(
            id="late",
            approvals=(
                ApprovalRule(tool="bash", command="deny-me", timeout=timedelta(hours=2)),
                ApprovalRule(
                    tool="bash",
                    command="allow-me",
                    timeout=timedelta(hours=1),
                    on_timeout="approve",
                ),
            ),
        )
    ]
    model = ScriptedModel(
        {
            ("late", Role.PLANNER): [
                [
                    tool("bash", command="echo deny-me >> /mnt/scratch/own/ran"),
                    tool("bash", command="echo allow-me >> /mnt/scratch/own/ran"),
                ],
                _told,
            ]
        }
    )
    async with running_worker(
        ts_env.client,
        data_dir=data_dir,
        definitions=definitions,
        model=model,
        task_queue=task_queue,
    ) as client:
        result = await client.execute_workflow(
            "lw.Planner", "go", id="run_late@1", task_queue=task_queue, result_type=AgentResult
        )
    denied, allowed = result.summary.split(" | ")
    assert denied.startswith("bash: not run: nobody approved this call before its approval timed")
    assert "(approval a1-" in denied and ", rule: bash command matching 'deny-me')" in denied
    assert allowed.startswith("exit code 0")
    assert (DataLayout.at(data_dir).runs / "run_late@1/scratch/ran").read_text() == "allow-me\n"


async def test_requests_carry_across_continue_as_new(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    definitions = [Definition(id="long", approvals=(ApprovalRule(tool="bash", command="ask"),))]
    model = ScriptedModel(
        {
            ("long", Role.PLANNER): [
                [tool("bash", command="echo ask one >> /mnt/scratch/own/ran")],
                [tool("bash", command="echo ask two >> /mnt/scratch/own/ran")],
                _told,
            ]
        }
    )
    workflow_id = f"run_long@{task_queue}"
    async with running_worker(
        dev_env.client,
        data_dir=data_dir,
        definitions=definitions,
        model=model,
        task_queue=task_queue,
    ) as client:
        handle = await client.start_workflow(
            "lw.Planner",
            AgentInput(task="go", turns_per_run=1),  # continue-as-new after every turn
            id=workflow_id,
            task_queue=task_queue,
            result_type=AgentResult,
        )
        [first] = await _pending(client, workflow_id)
        await decide(client, workflow_id, first.id, approve=True, by="carol")
        for _ in range(600):
            [second] = await _pending(client, workflow_id)
            if second.id != first.id:
                break
        listing = await list_approvals(client, workflow_id=workflow_id)
        # The new run numbers on and keeps the decision made in the one before.
        assert (first.id[:3], second.id[:3]) == ("a1-", "a2-")
        assert [r.request.id for r in listing.decided] == [first.id]
        assert listing.decided[0].by == "carol"
        refused = None
        try:
            await decide(client, workflow_id, first.id, approve=False, by="dana", why="late")
        except Exception as err:
            refused = str(err)
        assert refused is not None and "already decided: approved by carol" in refused
        await decide(client, workflow_id, second.id, approve=True, by="dana")
        result = await handle.result()
        first_run = client.get_workflow_handle(workflow_id, run_id=handle.first_execution_run_id)
        assert (await first_run.describe()).status is WorkflowExecutionStatus.CONTINUED_AS_NEW
    assert result.turns == 3
    ran = (DataLayout.at(data_dir).runs / workflow_id / "scratch/ran").read_text()
    assert ran == "ask one\nask two\n"


async def test_a_memory_rule_asks_about_the_tool_and_keeps_bash_out(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    workflow_id = f"run_memo@{task_queue}"
    async with running_worker(
        dev_env.client,
        data_dir=data_dir,
        definitions=SHARED,
        model=SHARED_MODEL,
        task_queue=task_queue,
    ) as client:
        handle = await client.start_workflow(
            "lw.Planner", "note", id=workflow_id, task_queue=task_queue, result_type=AgentResult
        )
        [request] = await _pending(client, workflow_id)
        assert (request.tool, request.action) == ("memory_write", "memory_write")
        assert request.arguments == {"path": "/mnt/memory/workflow/notes.md", "content": "kept\n"}
        notes = DataLayout.at(data_dir).workflow_memory("memo") / "notes.md"
        assert not notes.exists()
        await decide(client, workflow_id, request.id, approve=True, by="carol")
        result = await handle.result()
    bash, write = result.summary.split(" | ")
    assert "path is read-only: /mnt/memory/workflow/notes.md" in bash
    assert write.startswith("write /mnt/memory/workflow/notes.md: 5 bytes")
    assert notes.read_text() == "kept\n"


async def test_a_sub_run_rule_asks_beyond_its_count(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    definitions = [
        Definition(id="fan", approvals=(ApprovalRule(tool="plan_workflow", more_than=1),)),
    ]
    model = ScriptedModel(
        {
            (None, Role.ORCHESTRATOR): [
                [tool("plan_workflow", workflow="fan", task=f"part {n}") for n in (1, 2, 3)],
                _told,
            ],
            ("fan", Role.PLANNER): [[tool("finish", summary="part done")]],
        }
    )
    workflow_id = f"pipeline_{task_queue}"
    async with running_worker(
        dev_env.client,
        data_dir=data_dir,
        definitions=definitions,
        model=model,
        task_queue=task_queue,
    ) as client:
        handle = await client.start_workflow(
            "lw.Orchestrator", "fan out", id=workflow_id, task_queue=task_queue,
            result_type=AgentResult,
        )  # fmt: skip
        pending = await _pending(client, workflow_id, count=2)
        a1, a2 = (r.id for r in pending)
        assert [(r.id[:3], r.arguments["task"]) for r in pending] == [
            ("a1-", "part 2"),
            ("a2-", "part 3"),
        ]
        # Nothing of the reply starts before every request of it is decided.
        progress = await client.get_workflow_handle(workflow_id).query(
            PROGRESS_QUERY, result_type=Progress
        )
        assert progress.children == []
        assert progress.status == "waiting for approval"
        assert progress.running == [f"plan_workflow {a1}", f"plan_workflow {a2}"]
        await decide(client, workflow_id, a1, approve=True, by="carol")
        await decide(client, workflow_id, a2, approve=False, by="carol", why="two is enough")
        result = await handle.result()
    assert [c.rsplit("/", 1)[-1] for c in result.children] == ["run_fan@1", "run_fan@2"]
    told = result.summary.split(" | ")
    assert any(f"denied this call (approval {a2}" in t and "two is enough" in t for t in told)
    assert sum("finished after 1 turns: part done" in t for t in told) == 2


async def test_one_reply_opens_a_bounded_number_of_requests(
    ts_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    definitions = [Definition(id="many", approvals=(ApprovalRule(tool="bash", command="^true"),))]
    calls = [tool("bash", command=f"true {n}") for n in range(REQUESTS_PER_REPLY + 1)]
    model = ScriptedModel({("many", Role.PLANNER): [calls, _told]})
    async with running_worker(
        ts_env.client,
        data_dir=data_dir,
        definitions=definitions,
        model=model,
        task_queue=task_queue,
    ) as client:
        result = await client.execute_workflow(
            "lw.Planner", "go", id="run_many@1", task_queue=task_queue, result_type=AgentResult
        )
    told = result.summary.split(" | ")
    assert len(told) == REQUESTS_PER_REPLY + 1
    assert all("timed out" in t for t in told[:REQUESTS_PER_REPLY])
    assert told[-1].startswith(f"bash: not run: more than {REQUESTS_PER_REPLY} calls of one reply")
