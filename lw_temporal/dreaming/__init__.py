"""Dreaming: an agent that consolidates a workflow's finished runs into notes a human
reviews as a diff before they reach that workflow's memory.

``LittleWorkflowPlugin(dreaming=lw_temporal.options.DreamingAgentOptions(...))`` sets
what the dreaming agent is told and which consolidator replaces the model-free fallback.
The client calls below are what ``lw-temporal dream schedule|list|show|approve|reject``
runs.

Constants: ``DEFAULT_INSTRUCTIONS``, what the dreaming agent is told unless
``DreamingAgentOptions`` says otherwise (``{target}`` is the definition id it dreams for).
"""

from ._client import (
    approve_dream,
    dream_schedule_id,
    list_dreams,
    reject_dream,
    schedule_dreaming,
    show_dream,
    wait_for_review,
)
from ._consolidator import Consolidation, Consolidator, DefaultConsolidator, DreamContext, Note
from ._prompt import DEFAULT_INSTRUCTIONS
from ._records import (
    CommandRecord,
    Decision,
    DreamInput,
    DreamOptions,
    DreamResult,
    DreamState,
    DreamStatus,
    FailureRecord,
    FileChange,
    MemoryOpRecord,
    PromotionOutcome,
    RunRecord,
    ShowResult,
)

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "CommandRecord",
    "Consolidation",
    "Consolidator",
    "Decision",
    "DefaultConsolidator",
    "DreamContext",
    "DreamInput",
    "DreamOptions",
    "DreamResult",
    "DreamState",
    "DreamStatus",
    "FailureRecord",
    "FileChange",
    "MemoryOpRecord",
    "Note",
    "PromotionOutcome",
    "RunRecord",
    "ShowResult",
    "approve_dream",
    "dream_schedule_id",
    "list_dreams",
    "reject_dream",
    "schedule_dreaming",
    "show_dream",
    "wait_for_review",
]
