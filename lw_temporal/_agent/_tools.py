"""The tool registry: one record per tool, read by everyone who needs the contract.

A record says what the model is told (name, description, JSON schema), who may call it
(roles), how workflow code runs it (the activity and its typed request and result, or a
child workflow, or the end of the run) and how its result reads for the model. The
agent loop dispatches from it, ``lw.model`` offers ``tools_for(role)`` to the model,
adapters translate the same specs, and the scripted model's calls are validated by the
same request models, so a tool is added or given to a new role in one place: the
table (``TOOLS``) and its lookups are :mod:`._registry`; the record and the helpers
that build one are here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field

from .._base import FrozenModel
from .._bash import BashRequest, BashResult
from .._edit import (
    ToolOutcome,
)
from .._ids import Role
from ..memory._records import (
    ListResult,
    MemorySearchResult,
    MutationResult,
    ReadResult,
)
from ._protocol import ToolSpec

#: Bytes of a memory file one ``memory_read`` returns when the model names no size:
#: what a turn adds to the history stays bounded whatever a store holds.
MEMORY_READ_BYTES = 64 * 1024
MEMORY_LIST_LIMIT = 200
#: Files one ``memory_search`` returns when the model names no limit.
MEMORY_SEARCH_LIMIT = 10
#: Default command timeout when the model gives none (lw.bash enforces its own too).
BASH_DEFAULT_TIMEOUT = 600.0
#: UTF-8 bytes of a run's task, of a child's task and of a finish summary.
TASK_CAP = 16 * 1024
#: UTF-8 bytes of one rendered tool result: a safety net only, each tool bounds its own
#: output (lw.bash caps each stream and saves the rest behind ``stdout_ref``).
RESULT_CAP = 256 * 1024


def clip(text: str, limit: int) -> str:
    """Keep the head and tail of ``text`` within ``limit`` UTF-8 bytes, saying what was cut."""
    data = text.encode("utf-8", "surrogateescape")
    if len(data) <= limit:
        return text
    marker = f"\n...[{len(data)} bytes, middle cut]...\n".encode()
    keep = max(limit - len(marker), 0)
    head, tail = data[: keep * 2 // 3], data[len(data) - keep // 3 :] if keep // 3 else b""
    return (head + marker + tail).decode("utf-8", "ignore")


class ToolKind(StrEnum):
    ACTIVITY = "activity"
    CHILD = "child"
    FINISH = "finish"


class Offer(StrEnum):
    """Which adapters offer a tool: all, those sending function schemas (``memory_*``), or
    those sending the provider's native tools (which cover ``memory_*``). The loop runs
    any tool of the role, so a scripted or custom model may call either family."""

    ALWAYS = "always"
    FUNCTION = "function"
    NATIVE = "native"


@dataclass(frozen=True)
class Rendered:
    """A result as the model reads it."""

    text: str
    is_error: bool = False
    ref: str | None = None


Req = TypeVar("Req", bound=BaseModel)
Res = TypeVar("Res", bound=BaseModel)


@dataclass(frozen=True)
class Tool(Generic[Req, Res]):
    name: str
    description: str
    parameters: dict[str, Any]
    roles: frozenset[Role]
    kind: ToolKind
    request: type[Req]
    result: type[Res] | None = None
    activity: str | None = None
    render: Callable[[Res], Rendered] | None = None
    #: Argument defaults applied before validation (bounded reads and listings).
    defaults: Mapping[str, Any] = field(default_factory=dict)
    timeout: Callable[[Req], timedelta] = lambda _: timedelta(seconds=60)
    heartbeat: timedelta | None = None
    #: The provider's native tool type it is sent as, where the adapter speaks it.
    native: str | None = None
    offer: Offer = Offer.ALWAYS
    #: An answer for calls that need no work (bash's ``restart``), else ``None``.
    shortcut: Callable[[Mapping[str, Any]], str | None] | None = None

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=self.description,
            parameters=self.parameters,
            native=self.native,
            offer=self.offer.value,
        )

    def arguments(self, given: Mapping[str, Any]) -> Req:
        """The validated request; raises pydantic's ValidationError for the model."""
        return self.request.model_validate({**self.defaults, **given})

    def rendered(self, result: Res) -> Rendered:
        """The result as the model reads it (bounded by RESULT_CAP)."""
        assert self.render is not None
        shown = self.render(result)
        return Rendered(clip(shown.text, RESULT_CAP), shown.is_error, shown.ref)


class _Args(FrozenModel):
    """A tool's arguments as the model sends them: a misspelt one is refused, not dropped."""


class PlanWorkflowArgs(_Args):
    workflow: str = Field(min_length=1)
    task: str = Field(default="", max_length=TASK_CAP)


class RunStepArgs(_Args):
    task: str = Field(min_length=1, max_length=TASK_CAP)


class FinishArgs(_Args):
    summary: str = Field(default="", max_length=TASK_CAP)


def _schema(required: tuple[str, ...], **properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def _prop(kind: str | list[str], description: str, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "description": description, **extra}


_PATH = _prop(
    "string",
    "An absolute path under /mnt/memory/ as listed in your mount description, e.g. "
    "/mnt/memory/workflow/lessons.md.",
)
_IF_SHA = _prop(
    ["string", "null"],
    "Optional compare-and-set: the content_sha256 you last read (or 'absent' for a file "
    "that must not exist yet); the change is refused if the file changed since.",
)


def _render_bash(result: BashResult) -> Rendered:
    head = f"exit code {result.exit_code}"
    if result.timed_out:
        head += f" (timed out after {result.duration_seconds:.0f}s; its process tree was killed)"
    lines = [head]
    if result.rejection:
        lines.append(f"refused before running: {result.rejection}")
    for name, text, truncated, size, ref in (
        ("stdout", result.stdout, result.stdout_truncated, result.stdout_bytes, result.stdout_ref),
        ("stderr", result.stderr, result.stderr_truncated, result.stderr_bytes, result.stderr_ref),
    ):
        if truncated:
            lines.append(
                f"{name} ({size} bytes, cut in the middle; the whole output is saved in "
                f"{ref}: read it in parts with sed -n, head -c, tail -c or grep):\n{text}"
            )
        elif text:
            lines.append(f"{name}:\n{text}")
    if result.memory_changes:
        lines.append(
            "memory changes committed: "
            + ", ".join(f"{c.path} ({c.kind})" for c in result.memory_changes)
        )
    if result.memory_refused:
        lines.append("memory changes refused: " + "; ".join(result.memory_refused))
    failed = result.exit_code != 0 or bool(result.rejection) or bool(result.memory_refused)
    return Rendered("\n".join(lines), failed, result.stdout_ref or result.stderr_ref)


def _render_read(result: ReadResult) -> Rendered:
    if not result.exists:
        return Rendered(f"{result.path}: no such file (write it with memory_write)")
    head = f"{result.path} ({result.size} bytes, content_sha256 {result.content_sha256})"
    if result.truncated:
        shown = result.offset + len(result.content.encode("utf-8", "surrogateescape"))
        head += f"; bytes {result.offset}..{shown} shown: read on with offset={shown}"
    return Rendered(f"{head}\n{result.content}")


def _render_mutation(result: MutationResult) -> Rendered:
    text = f"{result.op} {result.path}: {result.bytes} bytes"
    if result.content_sha256:
        text += f", content_sha256 now {result.content_sha256}"
    if result.deleted:
        text += f"; deleted {len(result.deleted)}: " + ", ".join(result.deleted[:50])
    if result.findings:
        text += "; scan findings (kept, not blocking): " + ", ".join(
            f"{f.rule} at line {f.line}" for f in result.findings
        )
    if result.held:
        text += (
            "; held in quarantine: this run read untrusted input, so its change to shared "
            "memory waits for a person's release (this run sees it, other runs do not yet)"
        )
    return Rendered(text)


def _render_list(result: ListResult) -> Rendered:
    lines = [f"{result.path}: {len(result.entries)} entries"]
    lines += [f"{e.path} ({e.kind}, {e.size} bytes)" for e in result.entries]
    if result.truncated:
        lines.append("(listing truncated: list a subfolder, or raise limit)")
    return Rendered("\n".join(lines))


def _render_search(result: MemorySearchResult) -> Rendered:
    where = ", ".join(result.searched) or "no memory store"
    lines = [
        f"memory_search {result.query!r}: {len(result.hits)} files, best first, ranked "
        f"{result.ranking}; searched {where}"
    ]
    for n, hit in enumerate(result.hits, 1):
        lines.append(f"{n}. {hit.path} (score {hit.score:.4g})")
        lines += [f"   {line.number}: {line.text}" for line in hit.lines]
    if result.omitted:
        lines.append(
            f"({result.omitted} more files matched and are not shown: raise limit, or narrow "
            "the search with stores or path)"
        )
    if not result.hits:
        lines.append("no file matched: try other words a note would use, or memory_list")
    lines += [f"note: {note}" for note in result.notes]
    return Rendered("\n".join(lines))


def _render_outcome(result: ToolOutcome) -> Rendered:
    return Rendered(result.text, result.is_error)


def _bash_restart(arguments: Mapping[str, Any]) -> str | None:
    if arguments.get("restart") and not arguments.get("command"):
        return "The shell has been restarted. (Each command runs in a fresh shell anyway.)"
    return None


_AGENTS = frozenset(Role)
_MEMORY_TIMEOUT = timedelta(seconds=60)
#: A store's first search builds its index (seconds for thousands of notes).
_SEARCH_TIMEOUT = timedelta(minutes=5)


def _bash_timeout(request: BashRequest) -> timedelta:
    return timedelta(seconds=(request.timeout_seconds or BASH_DEFAULT_TIMEOUT) + 60)


def _activity_tool(
    name: str,
    activity: str,
    request: type[Req],
    result: type[Res],
    render: Callable[[Res], Rendered],
    description: str,
    parameters: dict[str, Any],
    *,
    timeout: Callable[[Req], timedelta] = lambda _: _MEMORY_TIMEOUT,
    heartbeat: timedelta | None = None,
    native: str | None = None,
    offer: Offer = Offer.ALWAYS,
    shortcut: Callable[[Mapping[str, Any]], str | None] | None = None,
    **defaults: Any,
) -> Tool[Req, Res]:
    """A tool every agent has that one activity runs (bash and the memory tools)."""
    return Tool(
        name=name,
        description=description,
        parameters=parameters,
        roles=_AGENTS,
        kind=ToolKind.ACTIVITY,
        request=request,
        result=result,
        activity=activity,
        render=render,
        defaults=defaults,
        timeout=timeout,
        heartbeat=heartbeat,
        native=native,
        offer=offer,
        shortcut=shortcut,
    )


_WRITE_NOTE = (
    " Only writable (rw) memory mounts accept it. Every change is versioned and audited, "
    "content is scanned for secrets, and each store has a quota."
)


def _mutation_tool(
    name: str,
    activity: str,
    request: type[Req],
    description: str,
    required: tuple[str, ...],
    **properties: dict[str, Any],
) -> Tool[Req, MutationResult]:
    """A memory tool that changes a file: the same result, rendering, note and
    compare-and-set argument for all of them."""
    return _activity_tool(
        name,
        activity,
        request,
        MutationResult,
        _render_mutation,
        description + _WRITE_NOTE,
        _schema(required, path=_PATH, **properties, if_sha256=_IF_SHA),
        offer=Offer.FUNCTION,
    )
