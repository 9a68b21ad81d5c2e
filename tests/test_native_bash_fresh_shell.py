"""Claude's bash tool is documented as one shell kept alive across calls (the working
directory and variables of a command still there for the next); lw's bash runs each
command in a fresh sandboxed shell. So where Claude's tool is offered, the system prompt
says so: a ``cd`` and an ``export`` in one call are gone in the next, as the agent then
sees. The function-schema tool says it in its own description instead."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, WorkflowDefinition
from lw_temporal.ids import AgentId
from lw_temporal.testing import tool

from ._hierarchy_support import lw_worker
from ._native_support import check_answers, scripted_claude

STEPS = [
    tool("bash", command="mkdir -p proj && cd proj && export LW_X=1 && pwd"),
    tool("bash", command='pwd; echo "LW_X=${LW_X:-unset}"'),
]


async def test_the_system_prompt_says_each_bash_call_is_a_fresh_shell(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    standin, model = scripted_claude("shell", STEPS)
    run = AgentId.planner("shell", task_queue)
    async with lw_worker(
        dev_env, data_dir, task_queue, [WorkflowDefinition(id="shell")], model
    ) as client:
        await client.execute_workflow(
            "lw.Planner", AgentInput(task="Shell."), id=str(run), task_queue=task_queue,
            result_type=AgentResult,
        )  # fmt: skip
    assert standin.violations == []
    for body in standin.requests:
        assert {"type": "bash_20250124", "name": "bash"} in [
            {k: v for k, v in t.items() if k != "cache_control"} for t in body["tools"]
        ]
        assert "bash tool runs each command in a fresh shell" in body["system"][0]["text"]
    check_answers(
        standin.requests[-1],
        STEPS,
        [
            ("exit code 0\nstdout:\n/mnt/scratch/own/proj\n", False),
            ("exit code 0\nstdout:\n/mnt/scratch/own\nLW_X=unset\n", False),
        ],
    )
