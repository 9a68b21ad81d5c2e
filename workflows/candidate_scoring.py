"""``candidate-scoring``: scores a reviewed candidate, reading ``candidate-review``'s
memory read-only through ``/mnt/memory/peer-workflows/candidate-review/`` (the seeds'
``attach`` example) and keeping its rubric in its own workflow memory."""

from __future__ import annotations

from collections.abc import Sequence

from lw_temporal import AttachSpec, MemoryConfig, ModelRequest, Role, ToolCall, WorkflowDefinition
from lw_temporal.testing import ScriptKey, ScriptTurn, tool

candidate_scoring = WorkflowDefinition(
    id="candidate-scoring",
    description="Score a reviewed candidate with a rubric, using candidate-review's lessons.",
    instructions=(
        "Score the candidate in your task. Read candidate-review's lessons under "
        "/mnt/memory/peer-workflows/candidate-review/ and your rubric in "
        "/mnt/memory/workflow/. Plan in /mnt/scratch/own/plan.md, run one step per score, "
        "then finish with the total."
    ),
    memory=MemoryConfig(workflow="rw", org="ro", attach=(AttachSpec(id="candidate-review"),)),
    max_turns=12,
)

STEPS = ("technical", "collaboration")

RUBRIC = """\
# Scoring rubric
- technical: 0-5, from the review's findings
- collaboration: 0-5, from the references step
"""

PEER = "/mnt/memory/peer-workflows/candidate-review"


def _look_around(request: ModelRequest) -> Sequence[ToolCall]:
    return [
        tool(
            "bash",
            command=(
                f"cat {PEER}/lessons-learned.md | tail -n 2; ls {PEER}/job-templates/; "
                "cat /mnt/memory/workflow/rubric.md 2>/dev/null || echo '(no rubric yet)'"
            ),
        )
    ]


def _plan(request: ModelRequest) -> Sequence[ToolCall]:
    return [
        tool(
            "bash",
            command=(
                "cat > /mnt/scratch/own/plan.md <<'EOF'\n# Scoring plan\n"
                "Score technical and collaboration with the rubric; gaps were reviewed.\nEOF"
            ),
        ),
        tool("memory_write", path="/mnt/memory/workflow/rubric.md", content=RUBRIC),
    ]


def _score_step(request: ModelRequest) -> Sequence[ToolCall]:
    """A score that cites the plan, the rubric and the peer's lessons it read."""
    return [
        tool(
            "bash",
            command=(
                "set -e\n"
                "out=/mnt/scratch/own/score.md\n"
                f"echo '{request.task}: 4/5' > $out\n"
                "head -n 1 /mnt/scratch/from-planner/plan.md >> $out\n"
                f"grep '^- {request.task}' /mnt/memory/workflow/rubric.md >> $out\n"
                f"echo \"peer lessons read: $(grep -c 'Resume gaps' {PEER}/lessons-learned.md)\" "
                ">> $out\n"
                "cat $out"
            ),
        )
    ]


SCRIPTS: dict[ScriptKey, Sequence[ScriptTurn]] = {
    ("candidate-scoring", Role.PLANNER): [
        _look_around,
        _plan,
        [tool("run_step", task=step) for step in STEPS],
        [tool("finish", summary="scored job ABC-123: 8/10")],
    ],
    ("candidate-scoring", Role.WORKER): [
        _score_step,
        lambda request: [tool("finish", summary=f"{request.task}: 4/5")],
    ],
}
