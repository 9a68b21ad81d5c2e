"""lw-temporal: durable, sandboxed working memory for teams of AI agents on Temporal.

The top level holds what a worker is built from: the plugin and the definitions it
serves, the model interface an LLM adapter implements, the extension points (the memory
scanner, dreaming's consolidator) and the contract of the ``lw.bash`` activity. The rest
lives in public submodules by concern:

- ``lw_temporal.options``: the plugin's option groups (model calls, bash, memory, ...).
- ``lw_temporal.ids``: workflow IDs, the data dir layout, workflow names, the progress query.
- ``lw_temporal.memory``: the admin API over the memory stores, and scratch retention.
- ``lw_temporal.dreaming``: scheduling and reviewing dreams, and their records.
- ``lw_temporal.models``: the Anthropic and OpenAI adapters and the model's messages.
- ``lw_temporal.errors``: the ``ApplicationError`` types to branch on.
- ``lw_temporal.testing``: a scripted model and servers for testing your own pipelines.

Constants: ``REJECTED_EXIT_CODE``, the ``BashResult.exit_code`` of a command refused
before it ran (``BashResult.rejection`` says why).
"""

from ._agent import AgentInput, AgentResult, Model, ModelRequest, ModelResponse, ToolCall
from ._approvals import ApprovalRule
from ._bash import REJECTED_EXIT_CODE, BashRequest, BashResult
from ._definitions import AttachSpec, MemoryConfig, MemoryQuota, WorkflowDefinition
from ._egress import NetworkPolicy
from ._ids import Role
from ._plugin import LittleWorkflowPlugin
from ._scan import DefaultScanner, Finding, Scanner
from .dreaming._consolidator import Consolidator, DreamContext, Note
from .dreaming._records import RunRecord

__all__ = [
    "REJECTED_EXIT_CODE",
    "AgentInput",
    "AgentResult",
    "ApprovalRule",
    "AttachSpec",
    "BashRequest",
    "BashResult",
    "Consolidator",
    "DefaultScanner",
    "DreamContext",
    "Finding",
    "LittleWorkflowPlugin",
    "MemoryConfig",
    "MemoryQuota",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "NetworkPolicy",
    "Note",
    "Role",
    "RunRecord",
    "Scanner",
    "ToolCall",
    "WorkflowDefinition",
]
