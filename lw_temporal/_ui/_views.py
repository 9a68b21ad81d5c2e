"""What each page shows, read from the data dir and the server: kept apart from the
routes so each page's reading is one function, bounded (listings capped, files and
diffs cut at ``SHOWN_BYTES``)."""

from __future__ import annotations

import difflib
import itertools
from dataclasses import dataclass, field
from typing import Any

from .._agent._conversation import ConversationStore
from .._approvals import ApprovalRequest
from .._approvals._records import shown_arguments
from .._ids import InvalidWorkflowId, parse_workflow_id
from .._scope import StoreRef
from ..dreaming._records import DreamState
from ..memory._held import held_sets
from ..memory._manifest import manifests
from ..memory._quarantine import HeldRun, render, summary
from ..memory._records import RunManifest
from ..memory._stores import MemoryStores

#: Bytes of one file or diff a page shows; entries of one listing.
SHOWN_BYTES = 256 * 1024
LISTED = 1000
AUDIT_SHOWN = 200
RUNS_SHOWN = 200
#: Held run-and-store changes one quarantine page shows (the oldest first).
HELD_SHOWN = 50
#: Pending approval requests the approvals page shows (the oldest first; the rest are
#: counted): up to 500 running workflows of up to 50 requests each would otherwise make
#: one page of tens of thousands of forms, each reading its run's conversation.
PENDING_SHOWN = 100
#: Manifests read to find the newest runs.
RUNS_READ = 5000


@dataclass
class DiffLine:
    kind: str
    text: str


@dataclass
class FileDiff:
    """One file of a dream's proposal as the page shows it."""

    path: str
    kind: str
    bytes: int
    sources: tuple[str, ...]
    more_sources: int
    lines: list[DiffLine] = field(default_factory=list)


def diff_lines(text: str) -> list[DiffLine]:
    """A unified diff's lines, each with what it is (for colour, never for markup)."""
    out: list[DiffLine] = []
    for line in text.splitlines():
        if line.startswith(("+++", "---")):
            kind = "head"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("#"):
            kind = "note"
        else:
            kind = "ctx"
        out.append(DiffLine(kind, line))
    return out


def dream_files(state: DreamState, shown: str) -> list[FileDiff]:
    """The proposal's files, each with its part of the diff the dream showed (which
    heads each file with ``# <target>/<path>: from runs ...``)."""
    files = {
        c.path: FileDiff(
            path=c.path,
            kind="new" if c.base_sha256 is None else "changed",
            bytes=c.bytes,
            sources=c.sources,
            more_sources=max(c.sources_count - len(c.sources), 0),
        )
        for c in state.changes
    }
    current: FileDiff | None = None
    prefix = f"# {state.target}/"
    for line in diff_lines(shown):
        if line.text.startswith(prefix):
            path = line.text[len(prefix) :].rsplit(": from runs ", 1)[0]
            current = files.get(path)
            continue
        if current is not None:
            current.lines.append(line)
    return list(files.values())


@dataclass
class HeldView:
    """One run's held changes to one store, as the quarantine page shows them."""

    run: HeldRun
    label: str
    lines: list[DiffLine]
    truncated: bool


def held_views(stores: MemoryStores) -> tuple[list[HeldView], int]:
    """What tainted runs hold, oldest first, each with its diff against the store as it
    is now (cut at SHOWN_BYTES), at most HELD_SHOWN of them; and how many there are."""
    found = sorted(
        ((summary(hs, held), hs, held) for hs, held in held_sets(stores)),
        key=lambda f: (f[0].created, f[0].workflow_id, f[0].store),
    )
    views = []
    for run, hs, held in found[:HELD_SHOWN]:
        label = stores.label(held.ref)
        text = render(hs, held, label)
        views.append(HeldView(run, label, diff_lines(text[:SHOWN_BYTES]), len(text) > SHOWN_BYTES))
    return views, len(found)


def version_diff(stores: MemoryStores, store: StoreRef, path: str, a: str, b: str) -> str:
    """The unified diff between two kept versions of a file (cut at SHOWN_BYTES)."""
    old, new = stores.blob(store, a), stores.blob(store, b)
    if old is None or new is None:
        return "(one of these versions is no longer kept)"
    lines = difflib.unified_diff(
        old.decode("utf-8", "replace").splitlines(keepends=True),
        new.decode("utf-8", "replace").splitlines(keepends=True),
        fromfile=f"{path}@{a[:12]}",
        tofile=f"{path}@{b[:12]}",
    )
    text = "".join(lines) or "(no difference)"
    return text[:SHOWN_BYTES]


def recent_runs(stores: MemoryStores) -> list[RunManifest]:
    """The newest recorded runs (their manifests), newest first."""
    read = itertools.islice(manifests(stores.layout), RUNS_READ)
    found = sorted(read, key=lambda m: m.started, reverse=True)
    return found[:RUNS_SHOWN]


def whole_arguments(stores: MemoryStores, request: ApprovalRequest) -> dict[str, Any] | None:
    """The arguments of a request whose shown ones were cut, read from the run's
    conversation on this data dir, and only if they hash to what the request recorded."""
    try:
        segments = parse_workflow_id(request.workflow_id).segments
    except InvalidWorkflowId:
        return None
    if not request.conversation.replace("-", "").isalnum():
        return None
    conversations = ConversationStore(stores.layout.conversations)
    record = conversations.get(conversations.folder(segments, request.conversation), request.turn)
    if record is None:
        return None
    for call in record.reply.tool_calls:
        if call.id == request.call_id and shown_arguments(call.arguments)[2] == (
            request.arguments_sha256
        ):
            return call.arguments
    return None
