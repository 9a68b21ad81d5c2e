"""lw-temporal: durable, sandboxed working memory for teams of AI agents on Temporal."""

from ._definitions import (
    AttachSpec,
    DefinitionRegistry,
    MemoryConfig,
    MemoryQuota,
    WorkflowDefinition,
    canonical_json,
    pipeline_key,
)
from ._errors import NON_RETRYABLE
from ._ids import (
    DREAMING_WORKFLOW,
    ORCHESTRATOR_WORKFLOW,
    PLANNER_WORKFLOW,
    WORKER_WORKFLOW,
    DataLayout,
    InvalidWorkflowId,
    Role,
    RunId,
    parse_workflow_id,
)
from ._plugin import LittleWorkflowPlugin
from ._scope import Mode, Mount, Scope, StoreKind, StoreRef, derive_scope

__all__ = [
    "DREAMING_WORKFLOW",
    "NON_RETRYABLE",
    "ORCHESTRATOR_WORKFLOW",
    "PLANNER_WORKFLOW",
    "WORKER_WORKFLOW",
    "AttachSpec",
    "DataLayout",
    "DefinitionRegistry",
    "InvalidWorkflowId",
    "LittleWorkflowPlugin",
    "MemoryConfig",
    "MemoryQuota",
    "Mode",
    "Mount",
    "Role",
    "RunId",
    "Scope",
    "StoreKind",
    "StoreRef",
    "WorkflowDefinition",
    "canonical_json",
    "derive_scope",
    "parse_workflow_id",
    "pipeline_key",
]
