"""The agent's model side, by concern: the protocol (``_protocol``), the tool registry
(``_tools``), the worker-side conversation (``_conversation``), models without an LLM
(``_scripted``), the ``lw.model``/``lw.settings`` activities (``_activity``) and the
workflows' inputs and results (``_io``)."""

from ._activity import (
    MODEL_ACTIVITY,
    SETTINGS_ACTIVITY,
    ModelActivities,
    ModelTurn,
    SettingsRequest,
)
from ._conversation import DEFAULT_CONTEXT_BUDGET
from ._io import (
    ORCHESTRATOR_MAX_TREE_TURNS,
    ORCHESTRATOR_MAX_TURNS,
    AgentInput,
    AgentResult,
    AgentState,
    Bounds,
    Progress,
    WorkerSettings,
)
from ._protocol import (
    Exchange,
    Model,
    ModelRequest,
    ModelResponse,
    StopReason,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from ._registry import REGISTRY, TOOLS, tool_for, tools_for
from ._scripted import (
    MissingModel,
    ScriptedModel,
    ScriptKey,
    ScriptTurn,
    prefers_local_activity,
    tool,
)
from ._tools import Offer, Rendered, Tool, ToolKind

__all__ = [
    "DEFAULT_CONTEXT_BUDGET",
    "MODEL_ACTIVITY",
    "ORCHESTRATOR_MAX_TREE_TURNS",
    "ORCHESTRATOR_MAX_TURNS",
    "REGISTRY",
    "SETTINGS_ACTIVITY",
    "TOOLS",
    "AgentInput",
    "AgentResult",
    "AgentState",
    "Bounds",
    "Exchange",
    "MissingModel",
    "Model",
    "ModelActivities",
    "ModelRequest",
    "ModelResponse",
    "ModelTurn",
    "Offer",
    "Progress",
    "Rendered",
    "ScriptKey",
    "ScriptTurn",
    "ScriptedModel",
    "SettingsRequest",
    "StopReason",
    "Tool",
    "ToolCall",
    "ToolKind",
    "ToolResult",
    "ToolSpec",
    "Usage",
    "WorkerSettings",
    "prefers_local_activity",
    "tool",
    "tool_for",
    "tools_for",
]
