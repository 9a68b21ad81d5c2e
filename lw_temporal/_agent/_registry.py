"""The tool registry: every tool an agent can be offered, and which role has which
(each role's tools are written once, here; the machinery they are built from is
:mod:`._tools`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from .._bash import BashRequest, BashResult
from .._edit import (
    EDIT_ACTIVITY,
    MEMORY_TOOL_ACTIVITY,
    EditorRequest,
    MemoryToolRequest,
    ToolOutcome,
)
from .._ids import BASH_ACTIVITY, Role
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
    ReadResult,
)
from ._tools import (
    _AGENTS,
    _PATH,
    _SEARCH_TIMEOUT,
    MEMORY_LIST_LIMIT,
    MEMORY_READ_BYTES,
    MEMORY_SEARCH_LIMIT,
    FinishArgs,
    Offer,
    PlanWorkflowArgs,
    RunStepArgs,
    Tool,
    ToolKind,
    _activity_tool,
    _bash_restart,
    _bash_timeout,
    _mutation_tool,
    _prop,
    _render_bash,
    _render_list,
    _render_outcome,
    _render_read,
    _render_search,
    _schema,
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
