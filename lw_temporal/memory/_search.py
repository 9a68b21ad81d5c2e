"""Searching memory: ranked hits over the stores a caller may read.

A search names its stores as :class:`SearchTarget`s (the ``lw.memory.search``
activity takes them from the caller's scope, never from the request), each with how
its hits' paths are shown and an optional folder or file inside it. Each store's
index (:mod:`._searchdb`) is first brought in step with its files: built on a store's
first search, repaired under the store's lock when behind, so a commit never pays for
it. Ranking is by words (:mod:`._searchquery`; several stores' hits as one collection,
:mod:`._searchmerge`); with an :class:`Embedder` also by
meaning, in steps (:class:`Query`) so the activity calls the embedder on its event
loop between two pieces of blocking work.

Chunks are embedded when a search first needs them (at most :data:`EMBED_CAP` per
search, the rest ranked by words until later searches embed them), never in a commit:
a commit costs the same with or without an embedder. A vector is keyed by its chunk's
text, so it is computed once for every file and generation holding that text, and is
deleted with the last chunk that has it.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from .._scope import StoreRef
from ..errors._kinds import INVALID_REQUEST, MEMORY_BUSY, MEMORY_SEARCH_UNAVAILABLE, lw_error
from . import _fs
from ._apply import checkpoint, recover
from ._chunks import match_expression, phrases, query_terms
from ._index import tree_id
from ._journal import Cancelled, locked
from ._records import DEFAULT_SEARCH_HITS, MemorySearchResult
from ._searchdb import fts5_available, keep_vectors, meta
from ._searchmerge import StoreCounts, choose_words, rescore, store_counts
from ._searchquery import (
    LEXICAL_CAP,
    ChunkRow,
    Found,
    Lookup,
    as_hit,
    chunk_rows,
    fuse,
    informative,
    lexical,
    semantic,
    store_vectors,
    texts,
    unit,
)
from ._txn import StoreFiles

if TYPE_CHECKING:
    from ._writer import StoreWriter

#: Chunks one search may send to the embedder (besides the query).
EMBED_CAP = 256
#: Texts per embedder call.
EMBED_BATCH = 64
#: Characters of a chunk sent to the embedder (a chunk is at most 1.5 KiB anyway).
EMBED_CHARS = 8000
#: Seconds a search waits for the embedder (the activity heartbeats only in between).
EMBED_TIMEOUT = 20.0

#: A store's mark that its journal and index still hold what a redaction took back.
PURGE_PENDING = "purge-pending"

#: How a result says it was ranked.
BY_WORDS = (
    "by words (BM25); no embedder is configured, so a note that shares no word with the "
    "query is not found"
)
BY_WORDS_ONLY = "by words (BM25)"
BY_BOTH = "by words (BM25) and by meaning (embeddings), fused by reciprocal rank"

_T = TypeVar("_T")


class Embedder(Protocol):
    """Turns texts into vectors, to rank memory by meaning as well as by words.

    ``name`` names the vector space (provider, model, dimensions): vectors made under
    another name are not compared with these, and are made again. ``embed`` returns
    one vector per text, in order. ``lw_temporal.models.OpenAIEmbedder`` is one on
    OpenAI's embeddings API (Anthropic offers no embeddings endpoint).
    """

    @property
    def name(self) -> str: ...

    async def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]: ...


@dataclass(frozen=True, slots=True)
class SearchTarget:
    """One store to search: ``shown`` starts its hits' paths (``/mnt/memory/org/`` for
    an agent, empty for an operator) and ``prefix`` narrows it to a folder or file."""

    store: StoreRef
    shown: str = ""
    prefix: str = ""


def _cancelled(cancel: threading.Event | None) -> Callable[[], None]:
    def check() -> None:
        if cancel is not None and cancel.is_set():
            raise Cancelled()

    return check


class StoreSearch:
    """Search for :class:`MemoryStores` (a mixin: it needs ``files``, ``_writer`` and
    ``lock_timeout``)."""

    _writer: StoreWriter
    lock_timeout: float

    def files(self, store: StoreRef) -> StoreFiles:
        raise NotImplementedError

    def search(
        self,
        store: StoreRef,
        query: str,
        *,
        limit: int = DEFAULT_SEARCH_HITS,
        path: str = "",
    ) -> MemorySearchResult:
        """Search one store by words; hits name files relative to the store root
        (``path`` narrows it to a folder or file). Agents search through
        ``lw.memory.search``, which also ranks by meaning when an embedder is set."""
        prefix = "/".join(_fs.clean_relative(path, f"{store}:{path}"))
        q = Query(self, [SearchTarget(store, "", prefix)], query, limit, None)
        q.words(None)
        return q.result()

    def search_index(
        self, store: StoreRef, *, cancel: threading.Event | None = None
    ) -> Path | None:
        """The store's index file, in step with its files (built or repaired under the
        store's lock when it is missing or behind); ``None`` for a store never written."""
        files = self.files(store)
        if not files.root.exists() and not files.state.exists():
            return None
        if not fts5_available():
            raise lw_error(
                MEMORY_SEARCH_UNAVAILABLE,
                "memory search needs SQLite's FTS5, which this Python's sqlite3 module was "
                "built without (PRAGMA compile_options has no ENABLE_FTS5); run the worker "
                "on a Python whose sqlite3 has it (CPython's own builds and Debian's do)",
            )
        index = files.search
        path = index.current()
        usage = files.index.read_usage()
        if (
            path is not None
            and usage is not None
            and files.journal.pending() is None
            and index.checked(path)
            and meta(index.connect(path), "synced") == tree_id(usage.tree)
            and not (files.state / PURGE_PENDING).exists()
        ):
            return path
        with locked(files.state, str(store), cancel, self.lock_timeout):
            if (files.state / PURGE_PENDING).exists():
                self.finish_purge(files)  # a redaction stopped before its purge
            return self._in_step(files, cancel)

    def _in_step(
        self, files: StoreFiles, cancel: threading.Event | None, *, fresh: bool = False
    ) -> Path:
        """Bring the index in step (call under the store's lock): check it once per
        boot, repair what is behind, or build a new generation (``fresh``: always)."""
        recover(files)
        index = files.search
        root_fd = _fs.open_root(files.root, create=False, shown=str(files.store))
        try:
            tree = tree_id(self._writer.usage(files, root_fd).tree)
            path = index.current()
            if path is not None and not index.checked(path) and not index.check(path):
                index.drop()
                path = None
            if path is not None and not fresh:
                conn = index.connect(path)
                if meta(conn, "synced") != tree:
                    index.sync_all(conn, root_fd, files.index, tree, _cancelled(cancel))
                return path
            new, conn = index.create()
            try:
                if path is not None:
                    keep_vectors(conn, path)
                index.sync_all(conn, root_fd, files.index, tree, _cancelled(cancel))
                conn.execute("DELETE FROM vectors WHERE sha NOT IN (SELECT sha FROM chunks)")
            except BaseException:
                index.forget_connections()
                new.unlink(missing_ok=True)
                raise
            index.switch(new)
            return new
        finally:
            if root_fd is not None:
                os.close(root_fd)

    def reindex(self, store: StoreRef, *, cancel: threading.Event | None = None) -> None:
        """Build the store's index again from its files, into a new generation."""
        files = self.files(store)
        with locked(files.state, str(store), cancel, self.lock_timeout):
            self._in_step(files, cancel, fresh=True)

    def purge_search(self, store: StoreRef, *, drop: bool = False) -> None:
        """Leave no removed text in the store's index: bring it in step, merge its
        segments and copy it into a new generation (or ``drop`` it whole). Redaction
        calls it; so should anything else that removes text from a store (``forget``)."""
        files = self.files(store)
        with locked(files.state, str(store), None, self.lock_timeout):
            self.purge_locked(files, drop=drop)

    @staticmethod
    def mark_purge(files: StoreFiles) -> None:
        """Say, durably, that the store's journal and index are to be purged (before a
        redaction commits): if its process is killed before :meth:`finish_purge`, the
        next search of the store, or the next redaction, finishes it."""
        _fs.write_atomic(files.state / PURGE_PENDING, b"redaction\n")

    def finish_purge(self, files: StoreFiles) -> None:
        """Checkpoint the store (its journal holds the bytes of recent changes) and scrub
        its index (call under the store's lock), then drop :meth:`mark_purge`'s mark."""
        checkpoint(files)
        self.purge_locked(files)
        with suppress(FileNotFoundError):
            (files.state / PURGE_PENDING).unlink()

    def purge_locked(self, files: StoreFiles, *, drop: bool = False) -> None:
        """:meth:`purge_search` for a caller that holds the store's lock."""
        index = files.search
        if index.current() is None:
            return
        if drop:
            index.drop()
            return
        try:
            path = self._in_step(files, None)
            index.scrub(path)
        except sqlite3.DatabaseError:
            index.drop()  # what cannot be scrubbed goes whole


def _busy(target: SearchTarget, err: sqlite3.OperationalError) -> Exception:
    return lw_error(MEMORY_BUSY, f"memory search of {target.store}: the index is busy: {err}")


class Query:
    """One search over several stores, in steps: :meth:`words`, then (with an
    embedder) :meth:`to_embed` and :meth:`meaning`, then :meth:`result`."""

    def __init__(
        self,
        stores: StoreSearch,
        targets: Sequence[SearchTarget],
        query: str,
        limit: int,
        model: str | None,
    ) -> None:
        self.stores = stores
        self.targets = list(targets)
        self.query = query
        self.limit = limit
        self.model = model
        terms = query_terms(query)
        if not terms:
            raise lw_error(
                INVALID_REQUEST,
                f"memory search {query!r}: the query has no words to look for; ask with "
                "the words a note would use",
            )
        self.terms = terms
        #: Each store's FTS5 query: the query's words that are worth looking up there.
        self.exprs: list[str | None] = []
        self.paths: list[Path | None] = []
        #: What each store's index holds of the query's words.
        self.lookups: list[Lookup | None] = []
        self.by_words: list[Found] = []
        self.by_meaning: list[Found] = []
        #: Whether a store had more chunks matching by words than were ranked.
        self.capped = False
        self.notes: list[str] = []
        self._pending: list[tuple[int, str]] = []
        self._rows: list[list[ChunkRow]] = []

    def _conn(self, target: int) -> sqlite3.Connection | None:
        path = self.paths[target]
        if path is None:
            return None
        return self.stores.files(self.targets[target].store).search.connect(path)

    def words(self, cancel: threading.Event | None) -> None:
        """Bring every store's index in step and rank its chunks by words. Several
        stores are one collection: a word is common or rare among all their chunks,
        and their chunks are scored again over their counts together."""
        for i, target in enumerate(self.targets):
            self.paths.append(None)
            self.exprs.append(None)
            self.lookups.append(None)
            self._lookup_of(i, target, cancel)
        choose_words(self.lookups, self.terms)
        per_store: dict[int, list[Found]] = {}
        for i, target in enumerate(self.targets):
            hits = self._words_of(i, target, cancel)
            if hits:
                per_store[i] = hits
            self.by_words += hits
            if len(hits) >= LEXICAL_CAP:
                self.capped = True
        if len(per_store) > 1:  # bm25() of two stores does not compare: one collection
            self.by_words = rescore(self.by_words, self._counts(per_store))

    def _counts(self, per_store: dict[int, list[Found]]) -> dict[int, StoreCounts]:
        """Every searched store's counts (those without hits count toward how rare a
        word is), its candidates' among them."""
        counts: dict[int, StoreCounts] = {}
        for i, lookup in enumerate(self.lookups):
            conn = self._conn(i)
            if conn is None or lookup is None:
                continue
            if not lookup.simple:
                return {}  # a word FTS5 cuts in two: the stores' own scores stand
            looked_up = phrases(lookup.kept, self.terms)
            found = per_store.get(i, [])
            counts[i] = store_counts(conn, lookup, looked_up, (f.chunk for f in found))
        return counts

    def _lookup_of(self, i: int, target: SearchTarget, cancel: threading.Event | None) -> None:
        """Store ``i``'s index, in step, and what it holds of the query's words."""
        for attempt in range(2):
            try:
                self.paths[i] = self.stores.search_index(target.store, cancel=cancel)
                conn = self._conn(i)
                self.lookups[i] = None if conn is None else informative(conn, self.terms)
                return
            except sqlite3.OperationalError as err:
                raise _busy(target, err) from None
            except sqlite3.DatabaseError:
                if attempt:
                    raise
                self.stores.purge_search(target.store, drop=True)  # damaged: built again

    def _words_of(
        self, i: int, target: SearchTarget, cancel: threading.Event | None
    ) -> list[Found]:
        """Store ``i``'s chunks that match the words worth looking up there."""
        for attempt in range(2):
            lookup, conn = self.lookups[i], self._conn(i)
            if lookup is None or conn is None or not lookup.kept:
                return []
            try:
                expr = self.exprs[i] = match_expression(lookup.kept, self.terms)
                return lexical(conn, i, expr, target.prefix)
            except sqlite3.OperationalError as err:
                raise _busy(target, err) from None
            except sqlite3.DatabaseError:
                if attempt:
                    raise
                self.stores.purge_search(target.store, drop=True)  # damaged: built again
                self._lookup_of(i, target, cancel)  # its words as this store alone has them
        return []

    def to_embed(self, cancel: threading.Event | None) -> list[str]:
        """The texts to send to the embedder: the query, then chunks without a vector
        (at most :data:`EMBED_CAP`)."""
        assert self.model is not None
        out = [self.query]
        left = 0
        for i, target in enumerate(self.targets):
            conn = self._conn(i)
            rows = [] if conn is None else chunk_rows(conn, self.model, target.prefix)
            self._rows.append(rows)
            if conn is None:
                continue
            missing: dict[str, int] = {}
            for chunk_id, _path, _line, sha, has in rows:
                if not has and sha not in missing:
                    missing[sha] = chunk_id
            room = max(0, EMBED_CAP - len(self._pending))
            taken = list(missing.items())[:room]
            text_of = texts(conn, (chunk_id for _sha, chunk_id in taken), None)
            taken = [(sha, chunk_id) for sha, chunk_id in taken if chunk_id in text_of]
            self._pending += [(i, sha) for sha, _id in taken]
            out += [text_of[chunk_id][:EMBED_CHARS] for _sha, chunk_id in taken]
            left += len(missing) - len(taken)
        if left > 0:
            self.notes.append(
                f"{left} chunks have no embedding yet (each search embeds up to {EMBED_CAP}); "
                "they were ranked by words only"
            )
        return out

    def meaning(self, vectors: Sequence[Sequence[float]]) -> None:
        """Keep the chunks' new vectors and rank every chunk by meaning."""
        assert self.model is not None
        if len(vectors) != 1 + len(self._pending):
            raise ValueError(
                f"the embedder returned {len(vectors)} vectors for {1 + len(self._pending)} texts"
            )
        query = unit(vectors[0])
        for i in range(len(self.targets)):
            conn = self._conn(i)
            if conn is None:
                continue
            mine = [
                (sha, unit(vectors[n + 1])) for n, (t, sha) in enumerate(self._pending) if t == i
            ]
            if mine:
                store_vectors(conn, self.model, mine)
            embedded = {sha for sha, _vec in mine}
            rows = [r for r in self._rows[i] if r[4] or r[3] in embedded]
            self.by_meaning += semantic(conn, i, self.model, rows, query)

    def result(self) -> MemorySearchResult:
        ranked = fuse(self.by_words, self.by_meaning)
        shown = ranked[: self.limit]
        hits = []
        for i, target in enumerate(self.targets):
            mine = [h for h in shown if h.target == i]
            conn = self._conn(i)
            if not mine or conn is None:
                continue
            ids = [f.chunk for h in mine for f in h.chunks[:3]]
            text_of = texts(conn, ids, None)
            expr = self.exprs[i]
            if expr is not None:
                text_of.update(texts(conn, [c for h in mine for c in h.by_words], expr))
            hits += [(h, as_hit(target.shown + h.path, h, text_of)) for h in mine]
        hits.sort(key=lambda pair: shown.index(pair[0]))
        matched = {(h.target, h.path) for h in ranked if h.by_words}
        omitted = len(matched - {(h.target, h.path) for h in shown})
        if self.capped:
            self.notes.append(
                f"more files match by words than the {omitted + len(shown)} ranked; "
                "add words to the query, or narrow it with stores or path"
            )
        return MemorySearchResult(
            query=self.query,
            ranking=(
                BY_WORDS if self.model is None else BY_BOTH if self.by_meaning else BY_WORDS_ONLY
            ),
            searched=tuple(t.shown or str(t.store) for t in self.targets),
            hits=tuple(hit for _h, hit in hits),
            omitted=omitted,
            notes=tuple(self.notes),
        )


class Runner(Protocol):
    """Runs blocking work in a thread, given the event that says "cancelled"."""

    async def __call__(self, fn: Callable[[threading.Event], _T]) -> _T: ...


async def run_search(query: Query, embedder: Embedder | None, run: Runner) -> MemorySearchResult:
    """A whole search, with the blocking steps in ``run`` (a thread) and the embedder
    called on the event loop; an embedder that fails leaves the ranking by words."""
    await run(query.words)
    if embedder is not None:
        texts_ = await run(query.to_embed)
        try:
            batches = [texts_[i : i + EMBED_BATCH] for i in range(0, len(texts_), EMBED_BATCH)]
            answers = await asyncio.wait_for(
                asyncio.gather(*(embedder.embed(b) for b in batches)), EMBED_TIMEOUT
            )
            vectors = [v for answer in answers for v in answer]
            await run(lambda _cancel: query.meaning(vectors))
        except TimeoutError:
            query.by_meaning = []
            query.notes.append(
                f"the embedder did not answer within {EMBED_TIMEOUT:g}s, so the ranking is "
                "by words only"
            )
        except Exception as err:  # the search still answers, by words
            query.by_meaning = []
            query.notes.append(f"ranking by meaning failed, so it is by words only: {err}")
    return await run(lambda _cancel: query.result())
