"""What a reviewer is shown of a proposal, and what a consolidator is shown of memory."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from .._scope import StoreRef
from ..memory._stores import MemoryStores
from ._records import MAX_SOURCES, FileChange

#: What of the target's memory a consolidator is shown (its text files, bounded).
_MAX_MEMORY_FILE = 1024 * 1024
_MAX_MEMORY_TOTAL = 32 * 1024 * 1024
_LINE = re.compile(r"[^\n]*\n|[^\n]+")
_RUN_ID = re.compile(
    r"(?:pipeline_[A-Za-z0-9._-]+/sub-runs/)?run_[a-z0-9][a-z0-9._-]*@[A-Za-z0-9._-]+"
)


def read_memory(stores: MemoryStores, store: StoreRef) -> tuple[dict[str, str], dict[str, str]]:
    """The store's UTF-8 text files (bounded) and every file's sha256, by relative path,
    read through the stores' own (link-refusing) reads."""
    texts: dict[str, str] = {}
    versions: dict[str, str] = {}
    total = 0
    for entry in stores.list_files(store).entries:
        if entry.kind != "file":
            continue
        current = stores.read(store, entry.path)
        if not current.exists or current.content_sha256 is None:
            continue
        versions[entry.path] = current.content_sha256
        if entry.size > _MAX_MEMORY_FILE or total + entry.size > _MAX_MEMORY_TOTAL:
            continue
        if "\ufffd" in current.content:
            continue  # not UTF-8 text: nothing a consolidator can read
        texts[entry.path] = current.content
        total += entry.size
    return texts, versions


def sources_of(content: str, runs: Sequence[str]) -> tuple[tuple[str, ...], int]:
    """The runs a note came from: those of the dream's runs it cites by workflow ID, or
    all of the dream's runs when it cites none (a consolidator's tally note)."""
    known = set(runs)
    cited = [r for r in dict.fromkeys(_RUN_ID.findall(content)) if r in known]
    chosen = cited or list(runs)
    return tuple(chosen[:MAX_SOURCES]), len(chosen)


def _text(data: bytes | None) -> list[str]:
    """The lines of a file as a diff shows them: split at newlines only (``splitlines``
    would also split at a carriage return or a form feed inside a line)."""
    if data is None:
        return []
    return _LINE.findall(data.decode("utf-8", "replace"))


def render_diff(
    target: str,
    stores: MemoryStores,
    own: StoreRef,
    target_store: StoreRef,
    changes: Sequence[FileChange],
) -> str:
    """A unified diff per changed file against the target's file as the dream read it,
    each headed by the runs the note came from."""
    parts: list[str] = []
    for change in changes:
        before = stores.blob(target_store, change.base_sha256) if change.base_sha256 else None
        if change.base_sha256 and before is None:
            current = stores.read(target_store, change.path)
            if current.content_sha256 == change.base_sha256:
                before = current.content.encode("utf-8")
        after = stores.blob(own, change.sha256)
        more = change.sources_count - len(change.sources)
        runs = ", ".join(change.sources) + (f" and {more} more" if more > 0 else "")
        parts.append(f"# {target}/{change.path}: from runs {runs or '(none)'}\n")
        if after is None:
            parts.append("(the proposed version is no longer kept; run a new dream)\n")
            continue
        diff = difflib.unified_diff(
            _text(before),
            _text(after),
            fromfile=f"a/{target}/{change.path}" if before is not None else "/dev/null",
            tofile=f"b/{target}/{change.path}",
        )
        lines = [
            line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
            for line in diff
        ]
        parts.append("".join(lines) or "(no difference)\n")
    return "".join(parts)
