"""The tool registry: one record per tool, read by everyone who needs the contract.

A record says what the model is told (name, description, JSON schema), who may call it
(roles), how workflow code runs it (the activity and its typed request and result, or a
child workflow, or the end of the run) and how its result reads for the model. The
agent loop dispatches from it, ``lw.model`` offers ``tools_for(role)`` to the model,
adapters translate the same specs, and the scripted model's calls are validated by the
same request models, so a tool is added or given to a new role in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field

from .._base import FrozenModel
from .._bash import BASH_ACTIVITY, BashRequest, BashResult
from .._edit import (
    EDIT_ACTIVITY,
    MEMORY_TOOL_ACTIVITY,
    EditorRequest,
    MemoryToolRequest,
    ToolOutcome,
)
from .._ids import Role
from ..memory._activities import APPEND, DELETE, LIST, READ, REPLACE, SEARCH, WRITE
from ..memory._records import (
    ListResult,
    MemoryAppendRequest,
    MemoryDeleteRequest,
    MemoryListRequest,
    MemoryReadRequest,
    MemoryReplaceRequest,
    MemorySearchRequest,
    MemorySearchResult,
    MemoryWriteRequest,
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


TOOLS: tuple[Tool[Any, Any], ...] = (
    _activity_tool(
        "bash",
        BASH_ACTIVITY,
        BashRequest,
        BashResult,
        _render_bash,
        (
            "Run one bash command in your sandbox and get its exit code, stdout and stderr. "
            "Only the /mnt folders of your mount description exist (no network, a fresh "
            "/tmp); the working directory is /mnt/scratch/own. A path outside your mounts, "
            "or a write to a read-only mount, is refused before the command runs. Files "
            "you change under a writable /mnt/memory mount are committed after the command "
            "(versioned and audited). Each output stream is returned up to a cap; longer "
            "output is saved whole in a file the result names, which you read in parts "
            "with sed -n, head -c, tail -c or grep."
        ),
        _schema(
            ("command",),
            command=_prop("string", "The bash command line; pipes, heredocs and && work."),
            timeout_seconds=_prop(
                "number", "Kill the command after this many seconds (default 600).", minimum=1
            ),
        ),
        timeout=_bash_timeout,
        heartbeat=timedelta(seconds=30),
        native="bash_20250124",
        shortcut=_bash_restart,
    ),
    _activity_tool(
        "memory_read",
        READ,
        MemoryReadRequest,
        ReadResult,
        _render_read,
        "Read a memory file: returns its size, content_sha256 (for compare-and-set "
        "writes) and content, up to max_bytes from offset; a file that does not exist "
        "reads as 'no such file'.",
        _schema(
            ("path",),
            path=_PATH,
            offset=_prop("integer", "Byte offset to start at (default 0).", minimum=0),
            max_bytes=_prop(
                "integer", f"Bytes to return (default {MEMORY_READ_BYTES}).", minimum=1
            ),
        ),
        max_bytes=MEMORY_READ_BYTES,
        offer=Offer.FUNCTION,
    ),
    _mutation_tool(
        "memory_write",
        WRITE,
        MemoryWriteRequest,
        "Create or overwrite a memory file with content; returns its new content_sha256.",
        ("path", "content"),
        content=_prop("string", "The whole new content of the file."),
    ),
    _mutation_tool(
        "memory_append",
        APPEND,
        MemoryAppendRequest,
        "Append text to the end of a memory file, creating it if needed.",
        ("path", "content"),
        content=_prop("string", "The text to add (include a trailing newline)."),
    ),
    _mutation_tool(
        "memory_replace",
        REPLACE,
        MemoryReplaceRequest,
        "Replace the one exact occurrence of old with new in a memory file (old must "
        "occur exactly once; read the file first).",
        ("path", "old", "new"),
        old=_prop("string", "The exact text to replace; must occur exactly once."),
        new=_prop("string", "The replacement text."),
    ),
    _activity_tool(
        "memory_list",
        LIST,
        MemoryListRequest,
        ListResult,
        _render_list,
        "List the files and folders under a memory path (recursively by default), with "
        "sizes; /mnt/memory lists every store you can see.",
        _schema(
            ("path",),
            path=_PATH,
            recursive=_prop("boolean", "List subfolders too (default true)."),
            limit=_prop(
                "integer", f"Most entries to return (default {MEMORY_LIST_LIMIT}).", minimum=1
            ),
        ),
        limit=MEMORY_LIST_LIMIT,
        offer=Offer.FUNCTION,
    ),
    _activity_tool(
        "memory_search",
        SEARCH,
        MemorySearchRequest,
        MemorySearchResult,
        _render_search,
        "Search the memory you can see for the notes that answer a question: the files "
        "that match best come first, each with its matching lines and their line numbers "
        "(then read one with memory_read). Ranked by words (BM25; by meaning too when the "
        "worker has an embedder), so ask with the words a note would use. Searches every "
        "memory mount unless stores or path narrows it.",
        _schema(
            ("query",),
            query=_prop("string", "What you are looking for, in words a note would use."),
            limit=_prop(
                "integer",
                f"Most files to return (default {MEMORY_SEARCH_LIMIT}, at most 50).",
                minimum=1,
                maximum=50,
            ),
            stores=_prop(
                "array",
                "Only these memory mounts, named as in your mount description without "
                "/mnt/memory/ (workflow, org, pipeline, peer-workflows/<id>...).",
                items={"type": "string"},
            ),
            path=_prop(
                "string",
                "Only files at or below this path under /mnt/memory/, e.g. "
                "/mnt/memory/workflow/lessons/.",
            ),
        ),
        timeout=lambda _: _SEARCH_TIMEOUT,
        heartbeat=timedelta(seconds=30),
        limit=MEMORY_SEARCH_LIMIT,
    ),
    _mutation_tool(
        "memory_delete",
        DELETE,
        MemoryDeleteRequest,
        "Delete a memory file (or a folder with recursive=true).",
        ("path",),
        recursive=_prop("boolean", "Delete a folder and everything in it."),
    ),
    _activity_tool(
        "str_replace_based_edit_tool",
        EDIT_ACTIVITY,
        EditorRequest,
        ToolOutcome,
        _render_outcome,
        "Claude's text editor (text_editor_20250728) on the files of your mounts: view a "
        "file or folder, create a file, str_replace text that occurs once, insert lines. "
        "/memories/<x>/ is /mnt/memory/<x>/; memory edits are versioned and audited.",
        EditorRequest.model_json_schema(),
        native="text_editor_20250728",
        offer=Offer.NATIVE,
    ),
    _activity_tool(
        "memory",
        MEMORY_TOOL_ACTIVITY,
        MemoryToolRequest,
        ToolOutcome,
        _render_outcome,
        "Claude's memory tool (memory_20250818) on your memory stores: /memories/<x>/ is "
        "/mnt/memory/<x>/, read-only where that mount is. Every change is versioned, "
        "audited, scanned and within the store's quota.",
        MemoryToolRequest.model_json_schema(),
        native="memory_20250818",
        offer=Offer.NATIVE,
    ),
    Tool(
        name="plan_workflow",
        description=(
            "Start a planner sub-run of one of the registered workflows listed in your "
            "system prompt and wait for its summary. Keep the task short: write context "
            "for it to /mnt/scratch/own/ first, which the planner reads under "
            "/mnt/scratch/from-orchestrator/. Several plan_workflow calls in one reply run "
            "in parallel."
        ),
        parameters=_schema(
            ("workflow", "task"),
            workflow=_prop("string", "The workflow id, e.g. candidate-review."),
            task=_prop("string", "What this run must do, in a sentence or two."),
        ),
        roles=frozenset({Role.ORCHESTRATOR}),
        kind=ToolKind.CHILD,
        request=PlanWorkflowArgs,
    ),
    Tool(
        name="run_step",
        description=(
            "Start a worker step with a task and wait for its summary; several run_step "
            "calls in one reply run in parallel. Keep the task short: write the plan to "
            "/mnt/scratch/own/ first, which steps read under /mnt/scratch/from-planner/; "
            "each step writes its own findings to its scratch."
        ),
        parameters=_schema(
            ("task",), task=_prop("string", "What this step must do, in a sentence or two.")
        ),
        roles=frozenset({Role.PLANNER}),
        kind=ToolKind.CHILD,
        request=RunStepArgs,
    ),
    Tool(
        name="finish",
        description=(
            "End your run with a short summary for whoever started you (your parent agent "
            "or the user). Write anything longer to a file first and name it here."
        ),
        parameters=_schema(("summary",), summary=_prop("string", "The outcome, briefly.")),
        roles=_AGENTS,
        kind=ToolKind.FINISH,
        request=FinishArgs,
    ),
)

REGISTRY: dict[str, Tool[Any, Any]] = {t.name: t for t in TOOLS}


#: Tool by the activity that runs it.
BY_ACTIVITY: dict[str, Tool[Any, Any]] = {t.activity: t for t in TOOLS if t.activity}


def tools_for(role: Role) -> tuple[Tool[Any, Any], ...]:
    """The tools a role may call, in registry order."""
    return tuple(t for t in TOOLS if role in t.roles)


def tool_for(role: Role, name: str) -> Tool[Any, Any] | None:
    found = REGISTRY.get(name)
    return found if found is not None and role in found.roles else None
