"""Refusals are visible in spans and metrics without what was refused: a command the
pre-check refused carries its reason (not the path), a memory write refused by the
content scan or a quota says which, and a command's text appears only when the worker
opts in (``trace_commands=True``), and even then never a secret-looking part."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, MemoryQuota, Role, WorkflowDefinition
from lw_temporal.options import BashOptions
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import lw_worker
from .conftest import Traces

SECRET = "ghp_" + "Z" * 36
DEFINITION = WorkflowDefinition(id="guarded", quota=MemoryQuota(max_file_bytes=64))
MODEL = ScriptedModel(
    {
        ("guarded", Role.PLANNER): [
            [
                tool("bash", command="cat /etc/shadow"),
                tool("bash", command="echo hello-from-the-command"),
                tool("memory_write", path="/mnt/memory/workflow/creds.md", content=SECRET),
                tool("memory_write", path="/mnt/memory/workflow/big.md", content="x" * 200),
                tool("memory_write", path="/mnt/memory/workflow/ok.md", content="fine\n"),
                tool("bash", command=f"echo {SECRET} > /mnt/memory/workflow/by-bash.md"),
            ],
            [tool("finish", summary="done")],
        ]
    }
)


async def test_refusals_are_labelled_and_commands_traced_only_when_asked(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str, traces: Traces
) -> None:
    async with lw_worker(
        dev_env,
        data_dir,
        task_queue,
        [DEFINITION],
        MODEL,
        tracing=traces.provider,
        bash=BashOptions(trace_commands=True),
    ) as client:
        await client.execute_workflow(
            "lw.Planner",
            AgentInput(task="try"),
            id=f"run_guarded@{task_queue}",
            task_queue=task_queue,
            result_type=AgentResult,
        )
    spans = traces.finished()
    bash = [dict(s.attributes or {}) for s in spans if s.name == "lw.bash"]
    rejected, ran, leaked = bash
    assert leaked["lw.bash.memory_refused"] == 1
    assert leaked["lw.bash.memory_refusals"] == ("scan",)
    assert leaked["lw.bash.memory_changes"] == 0
    assert leaked["lw.bash.command"] == "echo …[redacted]"  # opted in, still no secret
    assert rejected["lw.bash.rejection"] == "path is outside the allowed roots"
    assert rejected["lw.bash.command"] == "cat /etc/shadow"  # opted in
    assert ran["lw.bash.command"] == "echo hello-from-the-command"
    assert "lw.bash.rejection" not in ran and ran["lw.bash.stdout_bytes"] == len(
        "hello-from-the-command\n"
    )

    writes = {
        str(a["lw.memory.path"]).rsplit("/", 1)[1]: a
        for a in (dict(s.attributes or {}) for s in spans if s.name == "lw.memory.write")
    }
    assert writes["creds.md"]["lw.memory.refusal"] == "scan"
    assert writes["creds.md"]["lw.error.type"] == "LwScanBlocked"
    assert writes["big.md"]["lw.memory.refusal"] == "quota"
    assert writes["ok.md"]["lw.memory.bytes"] == 5 and "lw.memory.refusal" not in writes["ok.md"]
    assert all(w["lw.memory.store"] == "workflow" for w in writes.values())
    for span in spans:
        for value in (span.attributes or {}).values():
            assert SECRET not in str(value) and "x" * 100 not in str(value)
        assert SECRET not in str(span.status.description or "")
