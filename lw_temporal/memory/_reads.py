"""Reading a store: files, listings, whole contents. No lock is taken: a rewrite is
atomic (rename) and an append only adds bytes at the end, so a reader sees one
version or the next, never a mix."""

from __future__ import annotations

import os
from pathlib import Path

from .._sandbox import shown_name
from ..errors._kinds import INVALID_REQUEST, lw_error
from . import _fs
from ._index import state_of
from ._records import ListEntry, ListResult, ReadResult
from ._txn import StoreFiles


def read(
    files: StoreFiles,
    path: str,
    *,
    offset: int = 0,
    max_bytes: int | None = None,
    shown: str | None = None,
) -> ReadResult:
    """A file's content and ``content_sha256``; ``exists=False`` if it is absent
    (including in a store never written). The sha256 comes from the current-version
    index when it still matches the file, so reading the start of a large file
    reads only that start."""
    shown = shown or f"{files.store}:{path}"
    parts = _fs.clean_relative(path, shown)
    if not parts:
        raise lw_error(INVALID_REQUEST, f"{shown} is the store's root folder; list it")
    root_fd = _fs.open_root(files.root, create=False, shown=shown)
    if root_fd is None:
        return ReadResult(path=shown, exists=False)
    index = files.index
    rel = "/".join(parts)
    try:
        with _fs.opened_dir(root_fd, parts[:-1], create=False, shown=shown) as fd:
            if fd is None:
                return ReadResult(path=shown, exists=False)
            opened = _fs.open_file_at(fd, parts[-1], shown)
            if opened is None:
                return ReadResult(path=shown, exists=False)
            file, info = opened
            try:
                known = index.known(rel, info)
                if known is None:
                    data = _fs.read_fd(file)
                    known = state_of(data)
                    index.remember(fd, parts[-1], rel, known, info)
                    size = len(data)
                    end = size if max_bytes is None else min(size, offset + max_bytes)
                    chunk = data[offset:end]
                else:
                    size = known.size
                    end = size if max_bytes is None else min(size, offset + max_bytes)
                    chunk = os.pread(file, max(0, end - offset), offset) if end > offset else b""
            finally:
                os.close(file)
    finally:
        os.close(root_fd)
    return ReadResult(
        path=shown,
        exists=True,
        content=chunk.decode("utf-8", errors="replace"),
        content_sha256=known.sha,
        size=size,
        offset=offset,
        truncated=end < size,
    )


def list_files(
    root: Path,
    path: str = "",
    *,
    recursive: bool = True,
    limit: int = 10_000,
    shown: str,
) -> ListResult:
    """Files and folders below ``path`` (store-relative); a missing store or folder
    lists as empty. Links are listed as ``link`` and never entered."""
    parts = _fs.clean_relative(path, shown)
    rel = "/".join(parts)
    root_fd = _fs.open_root(root, create=False, shown=shown)
    if root_fd is None:
        return ListResult(path=shown)
    entries: list[ListEntry] = []
    truncated = False
    try:
        with _fs.opened_dir(root_fd, parts[:-1], create=False, shown=shown) as parent:
            kind = None if parent is None else (_fs.kind_at(parent, parts[-1]) if parts else "dir")
        if kind == "file":
            assert parent is not None
            size = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False).st_size
            return ListResult(path=shown, entries=(ListEntry(path=rel, kind="file", size=size),))
        if kind == "link":
            raise _fs._link_error(shown, parts[-1])
        with _fs.opened_dir(root_fd, parts, create=False, shown=shown) as fd:
            if fd is not None:
                prefix = f"{rel}/" if rel else ""
                for sub, k, size in _fs.walk_files(fd, prefix, recursive=recursive):
                    if len(entries) >= limit:
                        truncated = True
                        break
                    entries.append(_entry(sub, k, size))
    finally:
        os.close(root_fd)
    return ListResult(path=shown, entries=tuple(entries), truncated=truncated)


def read_bytes(root: Path, rel: str, store: str) -> bytes | None:
    """A file's whole current content (``None`` if absent); links refused."""
    parts = _fs.clean_relative(rel, f"{store}:{rel}")
    root_fd = _fs.open_root(root, create=False, shown=store)
    if root_fd is None or not parts:
        return None
    try:
        with _fs.opened_dir(root_fd, parts[:-1], create=False, shown=rel) as fd:
            return None if fd is None else _fs.read_at(fd, parts[-1], rel)
    finally:
        os.close(root_fd)


def _entry(path: str, kind: str, size: int) -> ListEntry:
    """A listing entry; a name memory cannot hold is shown escaped, with the reason."""
    try:
        path.encode("utf-8")
        refused = (
            "the name contains a control character; memory cannot read or write it"
            if _fs.CONTROL.search(path)
            else None
        )
    except UnicodeEncodeError:
        refused = "the name is not valid UTF-8; memory cannot read or write it"
    shown = path if refused is None else shown_name(path)
    return ListEntry.model_validate({"path": shown, "kind": kind, "size": size, "refused": refused})
