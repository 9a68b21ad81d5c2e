"""Scratch retention: delete the scratch of runs that closed long enough ago.

The seeds keep scratch "for inspection" by default, so the default policy keeps
everything; an operator opts into a retention period. Modules by concern: ``_records``
(pure data, the only one the workflow imports), ``_gc`` (finding and removing),
``_activities``, ``_workflow``, ``_client`` (the Schedule).
"""

from ._activities import RetentionActivities
from ._client import schedule_retention
from ._gc import collect_garbage, scratch_dirs
from ._records import (
    AUDIT_FILE,
    RETENTION_GC,
    RETENTION_SCHEDULE_ID,
    RETENTION_WORKFLOW,
    GcItem,
    GcReport,
    RetentionPolicy,
)
from ._workflow import ScratchRetentionWorkflow

__all__ = [
    "AUDIT_FILE",
    "RETENTION_GC",
    "RETENTION_SCHEDULE_ID",
    "RETENTION_WORKFLOW",
    "GcItem",
    "GcReport",
    "RetentionActivities",
    "RetentionPolicy",
    "ScratchRetentionWorkflow",
    "collect_garbage",
    "schedule_retention",
    "scratch_dirs",
]
