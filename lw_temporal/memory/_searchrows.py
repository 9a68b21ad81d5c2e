"""One file's rows in a store's search index: its chunks, their text in FTS5, its sha256.

A commit touches as few pages as it can (each costs its old copy in the rollback
journal and its new one in the file): a changed chunk keeps its row and rowid, so its
text is replaced in place; vectors are keyed by text and left to searches to tidy.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping
from typing import Any

from . import _fs
from ._chunks import Chunk, chunks, is_binary


def _insert_chunk(conn: sqlite3.Connection, rel: str, chunk: Chunk) -> None:
    cursor = conn.execute(
        "INSERT INTO chunks(path, line, start, sha) VALUES(?, ?, ?, ?)",
        (rel, chunk.line, chunk.start, chunk.sha),
    )
    conn.execute("INSERT INTO body(rowid, text) VALUES(?, ?)", (cursor.lastrowid, chunk.text))


def _replace_chunk(conn: sqlite3.Connection, chunk_id: int, chunk: Chunk) -> None:
    """Give the row ``chunk_id`` another chunk's text and place."""
    conn.execute(
        "UPDATE chunks SET line = ?, start = ?, sha = ? WHERE id = ?",
        (chunk.line, chunk.start, chunk.sha, chunk_id),
    )
    conn.execute("DELETE FROM body WHERE rowid = ?", (chunk_id,))
    conn.execute("INSERT INTO body(rowid, text) VALUES(?, ?)", (chunk_id, chunk.text))


def _delete_chunks(conn: sqlite3.Connection, ids: list[int]) -> None:
    for chunk_id in ids:
        conn.execute("DELETE FROM body WHERE rowid = ?", (chunk_id,))
        conn.execute("DELETE FROM chunks WHERE id = ?", (chunk_id,))


def _set_file(conn: sqlite3.Connection, rel: str, sha: str, size: int, binary: bool) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO files(path, sha, size, binary) VALUES(?, ?, ?, ?)",
        (rel, sha, size, int(binary)),
    )


def put(conn: sqlite3.Connection, rel: str, sha: str, content: bytes) -> None:
    """Index ``content`` as the file ``rel`` (at ``sha``): chunks whose text is
    unchanged keep their rows (their offsets and line numbers are updated); the others
    take over the rows of chunks that are gone, and only their text is indexed again."""
    binary = is_binary(content)
    new = [] if binary else chunks(content)
    old: dict[str, list[int]] = {}
    for chunk_id, chunk_sha in conn.execute(
        "SELECT id, sha FROM chunks WHERE path = ? ORDER BY start", (rel,)
    ).fetchall():
        old.setdefault(chunk_sha, []).append(chunk_id)
    changed: list[Chunk] = []
    for chunk in new:
        reuse = old.get(chunk.sha)
        if reuse:
            conn.execute(
                "UPDATE chunks SET line = ?, start = ? WHERE id = ?",
                (chunk.line, chunk.start, reuse.pop(0)),
            )
        else:
            changed.append(chunk)
    free = [i for ids in old.values() for i in ids]
    for chunk in changed:
        if free:
            _replace_chunk(conn, free.pop(0), chunk)
        else:
            _insert_chunk(conn, rel, chunk)
    _delete_chunks(conn, free)
    _set_file(conn, rel, sha, len(content), binary)


def extend(conn: sqlite3.Connection, dir_fd: int, name: str, rel: str, prev: str, sha: str) -> bool:
    """Index an append to ``rel`` (from ``prev`` to ``sha``): its last chunk and what
    follows it are read and chunked again, nothing before. ``False`` if the index does
    not hold ``prev`` (the caller indexes the whole file)."""
    row = conn.execute("SELECT sha, binary FROM files WHERE path = ?", (rel,)).fetchone()
    if row is None or row[0] != prev:
        return False
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        size = os.fstat(fd).st_size
        if row[1]:
            _set_file(conn, rel, sha, size, True)
            return True
        last = conn.execute(
            "SELECT id, line, start, sha FROM chunks WHERE path = ? ORDER BY start DESC LIMIT 1",
            (rel,),
        ).fetchone()
        line, start = (1, 0) if last is None else (int(last[1]), int(last[2]))
        tail = os.pread(fd, size - start, start) if size > start else b""
    finally:
        os.close(fd)
    if len(tail) != size - start:
        return False
    new = chunks(tail, offset=start, line=line)
    if last is not None and new:
        if new[0].sha != last[3]:  # else the append began a chunk of its own
            _replace_chunk(conn, int(last[0]), new[0])
        new = new[1:]
    for chunk in new:
        _insert_chunk(conn, rel, chunk)
    _set_file(conn, rel, sha, size, False)
    return True


def remove(conn: sqlite3.Connection, rel: str) -> None:
    rows = conn.execute("SELECT id FROM chunks WHERE path = ?", (rel,)).fetchall()
    _delete_chunks(conn, [int(r[0]) for r in rows])
    conn.execute("DELETE FROM files WHERE path = ?", (rel,))


def follow_path(
    conn: sqlite3.Connection,
    root_fd: int,
    rel: str,
    ops: list[dict[str, Any]],
    contents: Mapping[str, bytes],
) -> None:
    """Bring ``rel`` along with ``ops``, the ops of one applied batch on it, in order:
    appends only (the usual case) re-chunk from its last chunk; anything else indexes
    its content (the batch's own, by sha256, or the file's)."""
    last = ops[-1]
    if last["k"] == "d":
        remove(conn, rel)
        return
    parts = tuple(rel.split("/"))
    with _fs.opened_dir(root_fd, parts[:-1], create=False, shown=rel) as fd:
        if fd is None:
            remove(conn, rel)
            return
        if all(op["k"] == "a" for op in ops) and extend(
            conn, fd, parts[-1], rel, ops[0]["prev"], last["sha"]
        ):
            return
        content = contents.get(last["sha"])  # by sha256: what the last op wrote
        if content is None:
            content = _fs.read_at(fd, parts[-1], rel)
    if content is None:
        remove(conn, rel)
    else:
        put(conn, rel, last["sha"], content)
