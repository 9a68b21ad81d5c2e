"""Definitions and a scripted model for the ``lw-temporal run``/``status`` and worker
metrics tests: ``steady`` succeeds (commands, memory, two steps), ``shaky`` starts a
step that fails (its model has no script for it)."""

from __future__ import annotations

from lw_temporal import Role, ScriptedModel, WorkflowDefinition, tool

DEFINITIONS = (
    WorkflowDefinition(id="steady", instructions="Do two small steps."),
    WorkflowDefinition(id="shaky", instructions="Start a step that cannot run."),
)

MODEL = ScriptedModel(
    {
        (None, Role.ORCHESTRATOR): [
            [tool("plan_workflow", workflow="steady", task="steady work")],
            [tool("finish", summary="pipeline done")],
        ],
        ("steady", Role.PLANNER): [
            [
                tool("bash", command="echo planning > /mnt/scratch/own/plan.md"),
                tool("bash", command="cat /etc/shadow"),
                tool(
                    "memory_append",
                    path="/mnt/memory/workflow/lessons-learned.md",
                    content="- two steps are enough\n",
                ),
            ],
            [tool("run_step", task="first"), tool("run_step", task="second")],
            [tool("finish", summary="steady done")],
        ],
        ("steady", Role.WORKER): [
            [tool("bash", command="cat /mnt/scratch/from-planner/plan.md")],
            [tool("finish", summary="step done")],
        ],
        ("shaky", Role.PLANNER): [
            [tool("run_step", task="doomed")],
            [tool("finish", summary="shaky done, one step failed")],
        ],
    }
)
