"""The sample pipeline: one orchestrator composing ``candidate-review`` then
``candidate-scoring``, and the :class:`ScriptedModel` that plays all of its agents.

The orchestrator reads every workflow's lessons (``/mnt/memory/available-workflows/``)
and the pipeline's history before planning, writes a brief for its planners to its own
scratch, and records the run in pipeline memory, the only memory it may write.
"""

from __future__ import annotations

from collections.abc import Sequence

from lw_temporal import ModelRequest, ModelResponse, Role, ToolCall, WorkflowDefinition
from lw_temporal.testing import ScriptedModel, ScriptKey, ScriptTurn, tool

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

# The dreaming agent: it reads the run files and the target's memory with bash, then
# writes its notes with one bash command (grep/awk over the run files), citing the
# runs each section comes from.
_NOTES = "/mnt/memory/workflow"
_CONSOLIDATE = r"""cd /mnt/scratch/own/runs && {
echo "# Lessons consolidated from $(ls *.md | wc -l) runs"
echo
echo "Runs:"
grep -h '^# Run ' *.md | sed 's/^# Run /- /' | sort
echo
echo "## Lessons the runs recorded"
echo
awk 'FNR==1{m=0;b=0} m&&/^```/{b=!b;next} m&&b&&NF&&!/^#/{sub(/^[-*] /,"");print "- " $0;next}
  !b&&/^## Memory changes/{m=1;next} !b&&/^## /{m=0}' *.md \
  | sort | uniq -c | sort -k1,1nr -k2 \
  | awk '{n=$1; $1=""; sub(/^ /,""); print $0 (n>1 ? " (" n " runs)" : "")}'
} > NOTES/consolidated.md
{
echo "# Commands that failed"
echo
grep -h '^- exit [1-9]' *.md | sort | uniq -c | sort -k1,1nr -k2 \
  | awk '{n=$1; $1=""; sub(/^ /,""); print $0 " (" n "x)"}'
grep -q '^- exit [1-9]' *.md || echo "- (none)"
} > NOTES/failures.md
wc -l NOTES/*.md""".replace("NOTES", _NOTES)

DREAMING_SCRIPT: Sequence[ScriptTurn] = [
    [
        tool(
            "bash",
            command=(
                "ls /mnt/scratch/own/runs/; head -n 12 /mnt/scratch/own/runs/*.md; "
                "ls -R /mnt/memory/peer-workflows/ /mnt/memory/workflow/ 2>/dev/null"
            ),
        )
    ],
    [tool("bash", command=_CONSOLIDATE)],
    [tool("finish", summary="consolidated the runs into consolidated.md and failures.md")],
]


class SampleModel(ScriptedModel):
    """The scripted model, with one dreaming script for every target definition."""

    async def next_turn(self, request: ModelRequest) -> ModelResponse:
        if request.role is Role.DREAMING and (request.definition_id, Role.DREAMING) not in (
            self.scripts
        ):
            self.scripts[(request.definition_id, Role.DREAMING)] = DREAMING_SCRIPT
        return await super().next_turn(request)


SCRIPTS: dict[ScriptKey, Sequence[ScriptTurn]] = {
    (None, Role.ORCHESTRATOR): ORCHESTRATOR_SCRIPT,
    **review.SCRIPTS,
    **scoring.SCRIPTS,
}


def sample_model() -> ScriptedModel:
    """A model that plays every agent of the sample pipeline, and dreaming for any
    definition."""
    return SampleModel(SCRIPTS)
