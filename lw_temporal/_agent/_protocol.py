"""What a model sees and says: the typed conversation of one agent run.

The conversation is a list of :class:`Exchange` (one per turn: what the model said and
asked, and the result of each tool call it made, bound to the call's id). Adapters
render it in their provider's native protocol (``tool_use``/``tool_result`` blocks,
``tool_calls``/``role: "tool"`` messages); nothing is ever re-encoded as chat text, so
a model trained on that protocol sees exactly the shape it was trained on.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from .._ids import Role

#: Why the model stopped: it called tools or finished (``end_turn``), ran out of output
#: tokens (``max_tokens``: the loop asks it to go on), or refused (the run fails).
StopReason = Literal["end_turn", "tool_use", "max_tokens", "refusal"]


#: Claude's bash tool, whose own definition promises one shell kept across calls.
NATIVE_BASH = "bash_20250124"
#: What lw's bash is instead, said in the system prompt where Claude's tool is offered.
FRESH_SHELL = (
    "Your bash tool runs each command in a fresh shell started in your working directory: "
    "the working directory, variables and background jobs of one call are gone in the "
    "next. Chain dependent steps in one command (cd dir && make), or write a script."
)


class Wire(BaseModel):
    """A model that leaves fields at their default out of its JSON: each turn's reply
    and results travel through the workflow history, where every field name repeated
    with a null or a zero costs bytes on every turn."""

    @model_serializer(mode="wrap")
    def _without_defaults(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for name, default in _defaults(type(self)).items():
                if name in data and getattr(self, name) == default:
                    del data[name]
        return data


_DEFAULTS: dict[type[BaseModel], dict[str, Any]] = {}


def _defaults(cls: type[BaseModel]) -> dict[str, Any]:
    """The default of each optional field, worked out once per class (pydantic inspects
    a default factory's signature each time it is asked, which made serializing a long
    conversation cost milliseconds per turn)."""
    found = _DEFAULTS.get(cls)
    if found is None:
        found = {
            name: field.get_default(call_default_factory=True)
            for name, field in cls.model_fields.items()
            if not field.is_required()
        }
        _DEFAULTS[cls] = found
    return found


class ToolCall(Wire):
    """One action the model asks for; ``id`` binds its result (adapters keep the
    provider's id, the activity numbers calls that come without one)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str = ""
    #: Set when the provider returned arguments that are not a JSON object: the call is
    #: answered with this error instead of being run.
    invalid_arguments: str | None = None


class ToolResult(Wire):
    """The answer to one tool call, as the model reads it.

    ``text`` is the result rendered by the tool's record in the registry (bounded by the
    tool's own caps); ``ref`` names the file holding the full output when it was longer.
    """

    model_config = ConfigDict(extra="forbid")

    call_id: str
    tool: str
    turn: int
    text: str
    is_error: bool = False
    ref: str | None = None

    @property
    def ok(self) -> bool:
        return not self.is_error


class Usage(Wire):
    """Tokens a run spent: per turn in each reply, summed per run and per tree."""

    model_config = ConfigDict(extra="forbid")

    input_tokens: int = 0
    output_tokens: int = 0
    #: Input tokens read from the provider's prompt cache (billed at a discount).
    cached_tokens: int = 0
    #: Input tokens written to the prompt cache this turn (Anthropic).
    cache_write_tokens: int = 0
    model_calls: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            model_calls=self.model_calls + other.model_calls,
        )

    def line(self) -> str:
        return (
            f"{self.input_tokens} input ({self.cached_tokens} cached), "
            f"{self.output_tokens} output tokens in {self.model_calls} model calls"
        )


class ModelResponse(Wire):
    """A model's answer: optional text, the tool calls to run in order, why it
    stopped, and what it cost."""

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    stop_reason: StopReason = "end_turn"
    usage: Usage = Field(default_factory=Usage)
    #: The workflow run whose ``lw.model`` asked for this reply, set by the worker on
    #: what it returns (never the model's): a reset run's history holds replies its
    #: base run asked, and its next turn tells the worker whose (``ModelTurn.prior_run``).
    run_id: str | None = Field(default=None, max_length=64)


class Exchange(Wire):
    """One turn: the model's reply and the results answering its tool calls."""

    turn: int
    reply: ModelResponse
    results: list[ToolResult] = Field(default_factory=list)
    #: Text the user side adds after the results (e.g. "your reply was cut off").
    note: str = ""


class ToolSpec(BaseModel):
    """A tool as offered to a model: name, description, JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]
    #: The provider's native tool type, for adapters that send it (see ``_tools.Offer``).
    native: str | None = None
    #: ``always``, ``function`` (adapters that send function schemas) or ``native``.
    offer: str = "always"

    def offered(self, *, native: bool) -> bool:
        """Whether an adapter that does (or does not) send native tools offers this one."""
        return self.offer == "always" or self.offer == ("native" if native else "function")

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


class ModelRequest(BaseModel):
    """Everything a model needs for one turn, assembled on the worker: the run's whole
    conversation (within the context budget) and what only the worker may decide."""

    role: Role
    workflow_id: str
    definition_id: str | None
    turn: int
    max_turns: int
    mounts: str
    instructions: str
    task: str
    #: Every earlier turn of the run, oldest first, each with its tool results.
    history: list[Exchange] = Field(default_factory=list)
    tools: list[ToolSpec]
    available_workflows: dict[str, str] = Field(default_factory=dict)
    #: Short notes for this turn only (an output cut at max_tokens, turns running out,
    #: results cleared to fit the context budget).
    notes: list[str] = Field(default_factory=list)
    #: How many older tool results were replaced by a pointer to their saved output.
    cleared_results: int = 0
    #: How many of those the previous turn had cleared already: the conversation up to
    #: the last of them is what that turn sent too (where a cache breakpoint survives
    #: this turn's clearing).
    stable_results: int = 0
    #: The summary standing in for the turns before ``history`` (compaction), if any.
    summary: str = ""
    #: This call asks for that summary: the model answers with text, calling no tool.
    summarize: bool = False
    #: The memory mounts as Claude's memory tool names them (``/memories/<x>/``), for
    #: adapters that send it.
    memories: str = ""

    def offered(self, *, native: bool) -> list[ToolSpec]:
        """The tools an adapter offers: with ``native``, the provider's native tools
        take the place of the function tools they cover."""
        return [t for t in self.tools if t.offered(native=native)]

    def system_prompt(self, *, native_tools: bool = False) -> str:
        """The seeds' system prompt: role, instructions, the mount description and the
        workflows it may start. Stable across turns, so providers can cache it.
        ``native_tools``: the model has Claude's own tools, so the description also
        says what ``/memories`` is and that each bash call is a fresh shell (Claude's
        bash tool is documented as one persistent session)."""
        parts = [
            f"You are the {self.role.value} agent of run {self.workflow_id}. You act only "
            "through your tools; every tool call gets a result in the next message."
        ]
        if self.instructions:
            parts.append(self.instructions)
        parts.append(self.mounts)
        if native_tools and any(t.native == NATIVE_BASH for t in self.tools):
            parts.append(FRESH_SHELL)
        if native_tools and self.memories:
            parts.append(self.memories)
        if self.available_workflows:
            parts.append(
                "Workflows you can start with plan_workflow:\n"
                + "\n".join(f"- {k}: {v}" for k, v in self.available_workflows.items())
            )
        parts.append(
            f"You have at most {self.max_turns} turns. Call finish with a short summary "
            "when your work is done; a reply without any tool call also ends your run."
        )
        return "\n\n".join(parts)

    def tool_results(self) -> list[ToolResult]:
        """Every tool result of the conversation, oldest first."""
        return [result for exchange in self.history for result in exchange.results]

    def last_results(self) -> list[ToolResult]:
        """The results of the previous turn's calls (what is new this turn)."""
        return list(self.history[-1].results) if self.history else []


@runtime_checkable
class Model(Protocol):
    """Whatever chooses an agent's next tool calls: an LLM adapter or a script."""

    async def next_turn(self, request: ModelRequest) -> ModelResponse: ...
