"""A model's tool calls are untrusted: a planner and its step, both of another
definition than the victim's, name the victim's scratch and memory every way a tool
takes a path (host paths, ``..`` out of a mount, a peer mount never attached, Claude's
``/memories`` names, a search for the victim's words) and call the tools of other roles
(``plan_workflow`` from a planner; ``run_step`` and ``plan_workflow`` from a step).
Every such call is answered with an error result or finds nothing, the victim's secret
is in no result, and both runs finish."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, ModelRequest, Role, ToolCall, WorkflowDefinition
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import lw_worker

#: The victim writes both words; the probe names only the first (its query, its grep),
#: so the second in a result would be the victim's file.
WORD, SECRET = "zq7741", "zq7741 kumquat-ledger-5502"
HIDDEN = SECRET.split()[1]
SEEN: dict[Role, list[tuple[str, str, bool]]] = {}


def _edit(command: str, **arguments: Any) -> ToolCall:
    return tool("str_replace_based_edit_tool", command=command, **arguments)


def _record(role: Role) -> Any:
    def turn(request: ModelRequest) -> list[ToolCall]:
        SEEN[role] = [
            (call.name, result.text, result.is_error)
            for exchange in request.history
            for call, result in zip(exchange.reply.tool_calls, exchange.results, strict=True)
        ]
        return [tool("finish", summary="probed")]

    return turn


def _reaches(data_dir: Path, victim: str) -> list[ToolCall]:
    scratch = data_dir / "runs" / victim / "scratch" / "secret.txt"
    memory = data_dir / "memory" / "workflows" / "victim" / "secret.md"
    return [
        tool("memory_read", path="/mnt/memory/peer-workflows/victim/secret.md"),
        tool("memory_read", path="/mnt/memory/workflow/../../../memory/workflows/victim/secret.md"),
        tool("memory_read", path=str(memory)),
        tool("memory_search", query=WORD),
        _edit("view", path=f"/mnt/scratch/own/../../../runs/{victim}/scratch/secret.txt"),
        _edit("view", path=str(scratch)),
        tool("memory", command="view", path="/memories/../peer-workflows/victim/secret.md"),
        tool("bash", command="cat /mnt/memory/peer-workflows/victim/*"),
        # Past the pre-check (host paths it lets through): the sandbox's view.
        tool("bash", command=f"cat {scratch} {memory} 2>&1; grep -rs {WORD} /mnt /tmp; echo done"),
    ]


async def test_tool_calls_reach_nothing_of_another_definitions_runs(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    SEEN.clear()
    victim = f"run_victim@{task_queue}"
    reaches = _reaches(data_dir, victim)
    model = ScriptedModel(
        {
            ("victim", Role.PLANNER): [
                [
                    tool("bash", command=f"echo '{SECRET}' > /mnt/scratch/own/secret.txt"),
                    tool("memory_write", path="/mnt/memory/workflow/secret.md", content=SECRET),
                ],
            ],
            ("probe", Role.PLANNER): [
                [*reaches, tool("plan_workflow", definition="victim", task="go")],
                [tool("run_step", task="probe too")],
                _record(Role.PLANNER),
            ],
            ("probe", Role.WORKER): [
                [*reaches, tool("run_step", task="x"), tool("plan_workflow", task="y")],
                _record(Role.WORKER),
            ],
        }
    )
    definitions = [WorkflowDefinition(id="victim"), WorkflowDefinition(id="probe")]
    async with lw_worker(dev_env, data_dir, task_queue, definitions, model) as client:
        await client.execute_workflow(
            "lw.Planner", AgentInput(task="keep it"), id=victim, task_queue=task_queue
        )
        assert (data_dir / "runs" / victim / "scratch" / "secret.txt").read_text().strip() == SECRET
        assert (data_dir / "memory" / "workflows" / "victim" / "secret.md").read_text() == SECRET
        result = await client.execute_workflow(
            "lw.Planner", AgentInput(task="probe"), id=f"run_probe@{task_queue}",
            task_queue=task_queue, result_type=AgentResult,
        )  # fmt: skip
    assert result.summary == "probed"
    for role in (Role.PLANNER, Role.WORKER):
        seen = SEEN[role]
        assert len(seen) >= len(reaches) + 1, seen
        for name, text, _error in seen:
            assert HIDDEN not in text, (role, name, text)
        by_name = {name: error for name, _text, error in seen}
        assert by_name["plan_workflow"] is True, seen
        assert all(error for name, _t, error in seen[:3]), seen  # the memory reads
        assert all(error for name, _t, error in seen[4:8]), seen  # editors' paths, peer bash
        assert seen[8][1].rstrip().endswith("done"), seen[8]  # the host-path bash ran
    assert dict((n, e) for n, _t, e in SEEN[Role.WORKER])["run_step"] is True
