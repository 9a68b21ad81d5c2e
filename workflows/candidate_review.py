"""``candidate-review``: the seeds' running example.

The planner reads the orchestrator's brief and its own past lessons, writes this run's
plan to scratch (``/mnt/scratch/own/plan.md``) and what future planners should know to
workflow memory (``lessons-learned.md``, ``job-templates/``); each worker step reads the
plan through ``/mnt/scratch/from-planner/`` and the templates through
``/mnt/memory/workflow/``, and writes its findings to its own scratch.
"""

from __future__ import annotations

from collections.abc import Sequence

from lw_temporal import MemoryConfig, ModelRequest, Role, ToolCall, WorkflowDefinition
from lw_temporal.testing import ScriptKey, ScriptTurn, tool

from .candidate_scoring import candidate_scoring

__all__ = ["SCRIPTS", "candidate_review", "candidate_scoring"]

candidate_review = WorkflowDefinition(
    id="candidate-review",
    description="Review one candidate for one job; record what future reviews should know.",
    instructions=(
        "Plan the review of the candidate in your task. Read the orchestrator's brief and "
        "your workflow's lessons first. Write this run's plan to /mnt/scratch/own/plan.md "
        "for your workers; write lasting lessons and job templates to /mnt/memory/workflow/. "
        "Start one run_step per review step, then finish with a short verdict."
    ),
    memory=MemoryConfig(workflow="rw", org="ro"),
    max_turns=12,
)

STEPS = ("resume", "gap-analysis", "references")

PLAN = """\
# Review plan for job ABC-123 (senior engineer)
Use the standard review; the candidate has resume gaps: add a gap-analysis step.
Steps: resume, gap-analysis, references.
"""

TEMPLATE = """\
# Senior engineer
- Ten years of systems work, design reviews, mentoring.
- Ask for one production incident the candidate owned end to end.
"""


def in_pipeline(request: ModelRequest) -> bool:
    return "/mnt/scratch/from-orchestrator/" in request.mounts


def _look_around(request: ModelRequest) -> Sequence[ToolCall]:
    reads = [
        "ls /mnt/memory/org/",
        "cat /mnt/memory/workflow/lessons-learned.md 2>/dev/null || echo '(no lessons yet)'",
    ]
    if in_pipeline(request):
        reads = [
            "cat /mnt/scratch/from-orchestrator/brief.md",
            "ls /mnt/memory/pipeline/",
            *reads,
        ]
    return [tool("bash", command="; ".join(reads))]


def _plan(request: ModelRequest) -> Sequence[ToolCall]:
    return [
        tool("bash", command=f"cat > /mnt/scratch/own/plan.md <<'EOF'\n{PLAN}EOF"),
        tool(
            "memory_write",
            path="/mnt/memory/workflow/job-templates/senior-engineer.md",
            content=TEMPLATE,
        ),
        tool(
            "memory_append",
            path="/mnt/memory/workflow/lessons-learned.md",
            content=(
                f"\n## {request.workflow_id}\n"
                "Resume gaps require a dedicated step before scoring; an inline check "
                "returns false positives.\n"
            ),
        ),
    ]


def _review_step(request: ModelRequest) -> Sequence[ToolCall]:
    """Findings built from every mount a worker reads: plan, template, brief."""
    brief = (
        "head -n 1 /mnt/scratch/from-orchestrator/brief.md"
        if in_pipeline(request)
        else "echo 'standalone review'"
    )
    return [
        tool(
            "bash",
            command=(
                "set -e\n"
                "out=/mnt/scratch/own/findings.md\n"
                f"printf '# %s\\n' '{request.task}' > $out\n"
                "grep '^Steps:' /mnt/scratch/from-planner/plan.md >> $out\n"
                "head -n 1 /mnt/memory/workflow/job-templates/senior-engineer.md >> $out\n"
                f"{brief} >> $out\n"
                "cat $out"
            ),
        )
    ]


SCRIPTS: dict[ScriptKey, Sequence[ScriptTurn]] = {
    ("candidate-review", Role.PLANNER): [
        _look_around,
        _plan,
        [tool("run_step", task=step) for step in STEPS],
        [tool("finish", summary="reviewed job ABC-123: advance to scoring, mind the gaps")],
    ],
    ("candidate-review", Role.WORKER): [
        _review_step,
        lambda request: [tool("finish", summary=f"{request.task}: no blockers")],
    ],
}
