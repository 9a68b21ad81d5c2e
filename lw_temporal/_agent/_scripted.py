"""Models without an LLM: a script per agent, and the stand-in for no model at all."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from temporalio.exceptions import ApplicationError

from .._ids import Role
from ..errors._kinds import MODEL_FAILED, MODEL_NOT_CONFIGURED, lw_error
from ._compaction import model_free_summary
from ._protocol import Model, ModelRequest, ModelResponse, ToolCall

ScriptTurn = Sequence[ToolCall] | Callable[[ModelRequest], Sequence[ToolCall]]
ScriptKey = tuple[str | None, Role]


def tool(name: str, /, **arguments: Any) -> ToolCall:
    """Shorthand for scripts: ``tool("bash", command="ls /mnt")``."""
    return ToolCall(name=name, arguments=arguments)


def prefers_local_activity(model: Model | None) -> bool:
    """Whether ``model`` answers in-process in milliseconds (a class attribute
    ``local_activity = True``), so a local activity suits it better than a task-queue
    round trip; a remote LLM says nothing and gets a regular activity."""
    return bool(getattr(model, "local_activity", False))


class ScriptedModel:
    """Plays a fixed script per (definition id, role): turn ``n`` of the agent gets the
    script's ``n``-th entry, a list of tool calls or a function of the request (so a
    worker's commands can depend on its task or on what earlier tools returned). The
    orchestrator's key is ``(None, Role.ORCHESTRATOR)``. A script that runs out
    finishes the agent; asked to summarise for a compaction, it lists the turns."""

    #: Answers in-process at once: by default the plugin calls it as a local activity.
    local_activity = True

    def __init__(self, scripts: Mapping[ScriptKey, Sequence[ScriptTurn]]) -> None:
        self.scripts = dict(scripts)

    async def next_turn(self, request: ModelRequest) -> ModelResponse:
        if request.summarize:
            # Asked to compact: a script has nothing to say, so it lists what happened.
            return ModelResponse(text=model_free_summary(request.summary, request.history))
        key = (request.definition_id, request.role)
        script = self.scripts.get(key)
        if script is None:
            raise ApplicationError(
                f"ScriptedModel has no script for definition {request.definition_id!r} as "
                f"{request.role.value}; add one under key {key!r}",
                type=MODEL_FAILED,
                non_retryable=True,
            )
        if request.turn >= len(script):
            return ModelResponse(
                text="script ended", tool_calls=[tool("finish", summary="script ended")]
            )
        entry = script[request.turn]
        calls = entry(request) if callable(entry) else entry
        return ModelResponse(text=f"turn {request.turn + 1}", tool_calls=list(calls),
                             stop_reason="tool_use" if calls else "end_turn")  # fmt: skip


class MissingModel:
    """Stands in when a plugin has no model: an agent fails at its first turn with a
    clear, non-retryable error instead of waiting for a model that never comes."""

    async def next_turn(self, request: ModelRequest) -> ModelResponse:
        raise lw_error(
            MODEL_NOT_CONFIGURED,
            f"workflow {request.workflow_id!r} needs a model, but this worker's "
            "LittleWorkflowPlugin has none: pass model=... (lw_temporal.models."
            "AnthropicModel or OpenAIModel, a ScriptedModel, or your own lw_temporal.Model)",
        )
