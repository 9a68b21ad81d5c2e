"""The sample pipeline: one orchestrator composing ``candidate-review`` then
``candidate-scoring``, and the :class:`ScriptedModel` that plays all of its agents.

The orchestrator reads every workflow's lessons (``/mnt/memory/available-workflows/``)
and the pipeline's history before planning, writes a brief for its planners to its own
scratch, and records the run in pipeline memory, the only memory it may write.
"""

from __future__ import annotations

from collections.abc import Sequence

from lw_temporal import (
    ModelRequest,
    Role,
    ScriptedModel,
    ScriptKey,
    ScriptTurn,
    ToolCall,
    WorkflowDefinition,
    tool,
)

from . import candidate_review as review
from . import candidate_scoring as scoring

DEFINITIONS: tuple[WorkflowDefinition, ...] = (review.candidate_review, scoring.candidate_scoring)

BRIEF = """\
Candidate: Dana Reyes, applying for job ABC-123 (senior engineer).
Known concern: two resume gaps (2019, 2022).
"""

#: What a real model is told as the sample pipeline's orchestrator (the scripted model
#: plays the same part in ORCHESTRATOR_SCRIPT).
ORCHESTRATOR_INSTRUCTIONS = """\
You run a hiring pipeline. First read the lessons of the workflows you can start
(/mnt/memory/available-workflows/) and the pipeline's history (/mnt/memory/pipeline/).
Write a short brief for your planners to /mnt/scratch/own/brief.md (candidate, job,
known concerns). Then start candidate-review, and after it candidate-scoring, with
plan_workflow. Finally append one line about this run to
/mnt/memory/pipeline/history.md (memory_append) and finish with the verdict and score.
"""

ORG_POLICY = """\
# PII handling
Never copy a candidate's contact details into memory; refer to them by name.
"""


def _history_line(request: ModelRequest) -> Sequence[ToolCall]:
    return [
        tool(
            "memory_append",
            path="/mnt/memory/pipeline/history.md",
            content=f"- {request.workflow_id}: reviewed and scored job ABC-123\n",
        ),
        tool("finish", summary="candidate Dana Reyes reviewed and scored 8/10"),
    ]


ORCHESTRATOR_SCRIPT: Sequence[ScriptTurn] = [
    [
        tool(
            "bash",
            command=(
                "ls /mnt/memory/available-workflows/*/; "
                "cat /mnt/memory/pipeline/history.md 2>/dev/null || echo '(first pipeline run)'"
            ),
        ),
        tool("bash", command=f"cat > /mnt/scratch/own/brief.md <<'EOF'\n{BRIEF}EOF"),
    ],
    [tool("plan_workflow", workflow="candidate-review", task="Review Dana Reyes for ABC-123.")],
    [tool("plan_workflow", workflow="candidate-scoring", task="Score Dana Reyes for ABC-123.")],
    _history_line,
]

SCRIPTS: dict[ScriptKey, Sequence[ScriptTurn]] = {
    (None, Role.ORCHESTRATOR): ORCHESTRATOR_SCRIPT,
    **review.SCRIPTS,
    **scoring.SCRIPTS,
}


def sample_model() -> ScriptedModel:
    """A model that plays every agent of the sample pipeline."""
    return ScriptedModel(SCRIPTS)
