"""Dreaming: consolidate many finished runs of one definition into reviewed memory.

``lw.Dreaming`` (ID ``dream_<target>@<token>``) reads the Temporal histories of the
target's planner runs that closed since the last dream, extracts what happened (tool
calls, commands and exit codes, failures, memory mutations), reads the target's memory,
and writes notes into dreaming's own store
(``memory/workflows/memory.dreaming/<target>/``). Nothing reaches the target's memory
until a human approves through the ``approve`` update; the copy then goes through the
store's compare-and-set, so an edit made to the target since the dream read it is
reported as a conflict instead of being overwritten.

The workflow history stays small whatever the number of runs: the run list and the
extracted records live in files in the dream's own scratch, and activities pass batch
numbers and note references, never the data.

Modules by concern: ``_records`` (pure data, the only one workflow code imports),
``_consolidator``, ``_history`` (extraction), ``_activities``, ``_workflow``,
``_client`` (Schedules and the reviewer's calls), ``_bookkeeping`` (cursor, claims and
consolidator state in ``.lw/``), ``_review`` (diffs), ``_runfile`` (the runs as files).
"""

from ._activities import DreamingActivities
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
    QUERY_STATE,
    SCHEDULED_TOKEN,
    UPDATE_APPROVE,
    UPDATE_REJECT,
    CommandRecord,
    Cursor,
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
from ._workflow import DreamingWorkflow

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "QUERY_STATE",
    "SCHEDULED_TOKEN",
    "UPDATE_APPROVE",
    "UPDATE_REJECT",
    "CommandRecord",
    "Consolidation",
    "Consolidator",
    "Cursor",
    "Decision",
    "DefaultConsolidator",
    "DreamContext",
    "DreamInput",
    "DreamOptions",
    "DreamResult",
    "DreamState",
    "DreamStatus",
    "DreamingActivities",
    "DreamingWorkflow",
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
