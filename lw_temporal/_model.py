"""The model behind each agent turn: a protocol, a scripted model, and ``lw.model``.

The model is worker-side configuration (``LittleWorkflowPlugin(model=...)``): a client
starting a workflow cannot choose it, and swapping a scripted model for a real LLM
changes no workflow code. Each turn the workflow calls the ``lw.model`` activity with
the agent's task and a bounded window of its transcript; the activity adds what only
the worker may decide (the mount description derived from ``activity.info()``, the
definition's instructions, the turn budget) and asks the :class:`Model` for tool calls.

Plugging in a real LLM is one class::

    class ClaudeModel:
        def __init__(self, client: anthropic.AsyncAnthropic) -> None:
            self.client = client

        async def next_turn(self, request: ModelRequest) -> ModelResponse:
            reply = await self.client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=4096,
                system=request.system_prompt(),
                tools=[spec.anthropic() for spec in request.tools],
                messages=request.messages(),
            )
            return ModelResponse(
                text="".join(b.text for b in reply.content if b.type == "text"),
                tool_calls=[
                    ToolCall(id=b.id, name=b.name, arguments=b.input)
                    for b in reply.content
                    if b.type == "tool_use"
                ],
            )

    plugin = LittleWorkflowPlugin(data_dir, definitions, model=ClaudeModel(client))
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field
from temporalio import activity
from temporalio.exceptions import ApplicationError

from ._config import LwConfig
from ._errors import MODEL_FAILED, MODEL_NOT_CONFIGURED, lw_error
from ._ids import Role

MODEL_ACTIVITY = "lw.model"

#: The default turn budget of an orchestrator (planners and workers take theirs from
#: ``WorkflowDefinition.max_turns``).
ORCHESTRATOR_MAX_TURNS = 24

_HEARTBEAT_SECONDS = 5.0


class ToolCall(BaseModel):
    """One action the model asks for. ``id`` is echoed in the result entry."""

    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str = ""


class TranscriptEntry(BaseModel):
    """One step of an agent's conversation, as the workflow records it.

    ``assistant`` entries hold what the model said and asked; ``tool`` entries hold a
    bounded rendering of a result (``ref`` names the file with the full output when it
    was cut), so the transcript never carries an unbounded payload.
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["assistant", "tool"]
    turn: int
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    call_id: str = ""
    tool: str = ""
    ok: bool = True
    ref: str | None = None


class ModelTurn(BaseModel):
    """What workflow code sends to ``lw.model``: only the conversation, never scope."""

    turn: int
    task: str = ""
    transcript: list[TranscriptEntry] = Field(default_factory=list)
    omitted: int = 0


class ToolSpec(BaseModel):
    """A tool offered to the model, with a JSON schema for its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]

    def anthropic(self) -> dict[str, Any]:
        """The tool in the Anthropic Messages API shape."""
        return {"name": self.name, "description": self.description, "input_schema": self.parameters}

    def openai(self) -> dict[str, Any]:
        """The tool in the OpenAI Chat Completions shape."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


def _schema(required: Sequence[str], **properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required)}


_STR = {"type": "string"}
_PATH = {"type": "string", "description": "a path under /mnt/memory/"}

TOOL_SPECS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        ToolSpec(
            name="bash",
            description="Run a bash command in your sandbox; only your /mnt mounts exist.",
            parameters=_schema(
                ["command"], command=_STR, timeout_seconds={"type": "number", "minimum": 0}
            ),
        ),
        ToolSpec(
            name="memory_read",
            description="Read a memory file.",
            parameters=_schema(["path"], path=_PATH),
        ),
        ToolSpec(
            name="memory_write",
            description="Create or overwrite a memory file (if_sha256: expected current hash).",
            parameters=_schema(
                ["path", "content"],
                path=_PATH,
                content=_STR,
                if_sha256={"type": ["string", "null"]},
            ),
        ),
        ToolSpec(
            name="memory_append",
            description="Append text to a memory file, creating it if needed.",
            parameters=_schema(["path", "content"], path=_PATH, content=_STR),
        ),
        ToolSpec(
            name="memory_list",
            description="List a memory folder.",
            parameters=_schema(["path"], path=_PATH),
        ),
        ToolSpec(
            name="memory_delete",
            description="Delete a memory file.",
            parameters=_schema(["path"], path=_PATH),
        ),
        ToolSpec(
            name="memory_replace",
            description="Replace one exact occurrence of old with new in a memory file.",
            parameters=_schema(["path", "old", "new"], path=_PATH, old=_STR, new=_STR),
        ),
        ToolSpec(
            name="plan_workflow",
            description=(
                "Start a planner sub-run of a registered workflow and wait for its summary. "
                "Keep the task short: put context in /mnt/scratch/own/, which the planner "
                "reads under /mnt/scratch/from-orchestrator/."
            ),
            parameters=_schema(["workflow"], workflow=_STR, task=_STR),
        ),
        ToolSpec(
            name="run_step",
            description=(
                "Start a worker step with a task; several run_step calls in one turn run "
                "in parallel. Returns the step's summary. Keep the task short: put the "
                "plan in /mnt/scratch/own/, which steps read under /mnt/scratch/from-planner/."
            ),
            parameters=_schema(["task"], task=_STR),
        ),
        ToolSpec(
            name="finish",
            description="End your run with a short summary for whoever started you.",
            parameters=_schema(["summary"], summary=_STR),
        ),
    )
}

_MEMORY_TOOLS = tuple(name for name in TOOL_SPECS if name.startswith("memory_"))
TOOLS_FOR_ROLE: dict[Role, tuple[str, ...]] = {
    Role.ORCHESTRATOR: ("bash", *_MEMORY_TOOLS, "plan_workflow", "finish"),
    Role.PLANNER: ("bash", *_MEMORY_TOOLS, "run_step", "finish"),
    Role.WORKER: ("bash", *_MEMORY_TOOLS, "finish"),
    Role.DREAMING: ("bash", *_MEMORY_TOOLS, "finish"),
}


class ModelRequest(BaseModel):
    """Everything a model needs for one turn, assembled on the worker."""

    role: Role
    workflow_id: str
    definition_id: str | None
    turn: int
    max_turns: int
    mounts: str
    instructions: str
    task: str
    transcript: list[TranscriptEntry]
    omitted: int = 0
    tools: list[ToolSpec]
    available_workflows: dict[str, str] = Field(default_factory=dict)

    def system_prompt(self) -> str:
        """The seeds' system prompt: role, instructions, and the mount description."""
        parts = [f"You are the {self.role.value} of run {self.workflow_id}."]
        if self.instructions:
            parts.append(self.instructions)
        parts.append(self.mounts)
        if self.available_workflows:
            parts.append(
                "Workflows you can start with plan_workflow:\n"
                + "\n".join(f"- {k}: {v}" for k, v in self.available_workflows.items())
            )
        parts.append(f"Turn {self.turn + 1} of at most {self.max_turns}; call finish when done.")
        return "\n\n".join(parts)

    def messages(self) -> list[dict[str, Any]]:
        """The task and transcript as chat messages (tool results as user text)."""
        head = self.task or "Begin."
        if self.omitted:
            head += f"\n\n({self.omitted} earlier transcript entries are not shown.)"
        out: list[dict[str, Any]] = [{"role": "user", "content": head}]
        for entry in self.transcript:
            if entry.kind == "assistant":
                calls = json.dumps([c.model_dump() for c in entry.tool_calls])
                out.append({"role": "assistant", "content": f"{entry.text}\n{calls}".strip()})
            else:
                status = "ok" if entry.ok else "error"
                out.append({"role": "user", "content": f"[{entry.tool} {status}] {entry.text}"})
        return out


class ModelResponse(BaseModel):
    """A model's answer: optional text and the tool calls to run, in order."""

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)


class ModelReply(BaseModel):
    """What ``lw.model`` returns to workflow code.

    Besides the model's answer it carries the worker-side settings workflow code needs
    but cannot see (the turn budget, whether the LwRole/LwDefinition search attributes
    exist, whether later turns may call the model as a local activity): in a reply they
    are recorded in history and replay deterministically.
    """

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    max_turns: int
    index_search_attributes: bool = False
    local_activity: bool = False


@runtime_checkable
class Model(Protocol):
    """Whatever chooses an agent's next tool calls: an LLM client or a script."""

    async def next_turn(self, request: ModelRequest) -> ModelResponse: ...


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
    worker's commands can depend on its task). The orchestrator's key is
    ``(None, Role.ORCHESTRATOR)``. A script that runs out finishes the agent."""

    #: Answers in-process at once: by default the plugin calls it as a local activity.
    local_activity = True

    def __init__(self, scripts: Mapping[ScriptKey, Sequence[ScriptTurn]]) -> None:
        self.scripts = dict(scripts)

    async def next_turn(self, request: ModelRequest) -> ModelResponse:
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
        return ModelResponse(text=f"turn {request.turn + 1}", tool_calls=list(calls))


class MissingModel:
    """Stands in when a plugin has no model: an agent fails at its first turn with a
    clear, non-retryable error instead of waiting for a model that never comes."""

    async def next_turn(self, request: ModelRequest) -> ModelResponse:
        raise lw_error(
            MODEL_NOT_CONFIGURED,
            f"workflow {request.workflow_id!r} needs a model, but this worker's "
            "LittleWorkflowPlugin has none: pass model=... (an LLM client implementing "
            "lw_temporal.Model, or a ScriptedModel)",
        )


class ModelActivities:
    """Holds the model and the worker's configuration; registers ``lw.model``."""

    def __init__(
        self,
        config: LwConfig,
        model: Model,
        *,
        index_search_attributes: bool = False,
        local_activity: bool = False,
        orchestrator_instructions: str = "",
        orchestrator_max_turns: int = ORCHESTRATOR_MAX_TURNS,
    ) -> None:
        self.config = config
        self.model = model
        self.index_search_attributes = index_search_attributes
        self.local_activity = local_activity
        self.orchestrator_instructions = orchestrator_instructions
        self.orchestrator_max_turns = orchestrator_max_turns

    def request_for(self, turn: ModelTurn) -> ModelRequest:
        """The full request of the calling workflow's turn; scope from activity.info()."""
        scope = self.config.activity_scope()
        definition = scope.definition
        if scope.role is Role.ORCHESTRATOR:
            instructions = self.orchestrator_instructions
            max_turns = self.orchestrator_max_turns
            available = {
                d.id: d.description or d.instructions[:200]
                for d in self.config.definitions.values()
            }
        else:
            assert definition is not None
            instructions = definition.instructions
            max_turns = definition.max_turns
            available = {}
        return ModelRequest(
            role=scope.role,
            workflow_id=scope.workflow_id,
            definition_id=definition.id if definition else None,
            turn=turn.turn,
            max_turns=max_turns,
            mounts=scope.describe(),
            instructions=instructions,
            task=turn.task,
            transcript=turn.transcript,
            omitted=turn.omitted,
            tools=[TOOL_SPECS[name] for name in TOOLS_FOR_ROLE[scope.role]],
            available_workflows=available,
        )

    @activity.defn(name=MODEL_ACTIVITY)
    async def run_turn(self, turn: ModelTurn) -> ModelReply:
        request = self.request_for(turn)
        heartbeat = asyncio.create_task(_heartbeat_forever())
        try:
            response = await self.model.next_turn(request)
        except (asyncio.CancelledError, ApplicationError):
            raise
        except Exception as err:
            raise lw_error(
                MODEL_FAILED,
                f"workflow {request.workflow_id!r}: the model failed on turn "
                f"{turn.turn + 1}: {type(err).__name__}: {err}",
            ) from err
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
        return ModelReply(
            text=response.text,
            tool_calls=response.tool_calls,
            max_turns=request.max_turns,
            index_search_attributes=self.index_search_attributes,
            local_activity=self.local_activity,
        )


async def _heartbeat_forever() -> None:
    """A slow model call must not look like a dead worker."""
    while True:
        activity.heartbeat()
        await asyncio.sleep(_HEARTBEAT_SECONDS)
