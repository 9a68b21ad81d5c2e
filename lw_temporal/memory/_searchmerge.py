"""Ranking the chunks of several stores by words as if they were one collection.

FTS5's ``bm25()`` weighs each phrase of a query by how rare it is in one store's index,
so two stores' scores do not compare: in a store of a few notes nearly every word is in
half of them or more, which ``bm25()`` gives its floor weight (a millionth), so the org
note that answers a question scored a millionth of a note in the workflow store that
shares one word with it, and fell under the noise floor of the merged list. When more
than one store has hits, each store's candidates (chosen by its own ``bm25()``) are
scored again with ``bm25()``'s own formula (k1 1.2, b 0.75) over the stores' counts
taken together: chunks, tokens, and chunks holding each phrase. One store alone keeps
``bm25()``'s scores, which this formula gives as well.

The counts come from FTS5's own tables: the averages record (chunks and tokens), the
index's count of chunks holding each word (a pair's counted by FTS5), and the
candidates' sizes and positions of the looked-up words (``fts5vocab``), which give
each candidate's occurrences of each phrase.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ._chunks import phrase_text
from ._searchquery import Found, Lookup, worth

#: ``bm25()``'s parameters (FTS5's fixed values).
K1, B = 1.2, 0.75
#: ``bm25()``'s weight for a phrase in half the chunks or more.
IDF_FLOOR = 1e-6
_INSTANCES = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.lw_instances USING fts5vocab(main, body, instance)"
)

Phrase = tuple[str, ...]


def _varints(blob: bytes) -> list[int]:
    """SQLite's varints (FTS5's record format), in order."""
    out: list[int] = []
    at = 0
    while at < len(blob):
        value = 0
        for n in range(9):
            byte = blob[at]
            at += 1
            if n == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


@dataclass(frozen=True, slots=True)
class StoreCounts:
    """One store's counts for a query: its chunks and tokens, the chunks holding each
    phrase it looked up (``hits``) and each candidate's occurrences of it (``tf``), the
    candidates' sizes in tokens, and the words it holds (``df``, for the phrases it did
    not look up)."""

    rows: int
    tokens: int
    phrases: list[Phrase]
    hits: dict[Phrase, int]
    tf: dict[Phrase, dict[int, int]]
    sizes: dict[int, int]
    df: dict[str, int]

    def chunks_holding(self, phrase: Phrase) -> int:
        """Chunks holding ``phrase``: counted if looked up, else at most its rarest word's."""
        if phrase in self.hits:
            return self.hits[phrase]
        return min((self.df.get(w, 0) for w in phrase), default=0)


def _rows(conn: sqlite3.Connection, statement: str, args: Sequence[object]) -> list[Any]:
    try:
        return conn.execute(statement, args).fetchall()
    except sqlite3.OperationalError:
        conn.execute(_INSTANCES)
        return conn.execute(statement, args).fetchall()


def store_counts(
    conn: sqlite3.Connection, lookup: Lookup, phrases: list[Phrase], ids: Iterable[int]
) -> StoreCounts:
    """The counts of one store for ``phrases`` (those its query looked up) and its
    candidate chunks ``ids``: a word's chunks are the index's own count, a pair's are
    counted by FTS5, and only the candidates' positions are read."""
    wanted = sorted(set(ids))
    row = conn.execute("SELECT block FROM body_data WHERE id = 1").fetchone()
    rows, tokens = ([*_varints(bytes(row[0])), 0, 0] if row else [0, 0])[:2]
    offsets: dict[str, dict[int, set[int]]] = {w: {} for p in phrases for w in p}
    sizes: dict[int, int] = {}
    for start in range(0, len(wanted), 500):
        part = wanted[start : start + 500]
        marks = ",".join("?" * len(part))
        for word, found in offsets.items():
            if word not in lookup.stems:
                continue
            for doc, offset in _rows(
                conn,
                f"SELECT doc, offset FROM temp.lw_instances WHERE term = ? AND doc IN ({marks})",
                (lookup.stems[word], *part),
            ):
                found.setdefault(int(doc), set()).add(int(offset))
        for chunk, size in conn.execute(
            f"SELECT id, sz FROM body_docsize WHERE id IN ({marks})", part
        ).fetchall():
            sizes[int(chunk)] = (_varints(bytes(size)) or [0])[0]
    hits: dict[Phrase, int] = {}
    tf: dict[Phrase, dict[int, int]] = {}
    for phrase in phrases:
        first, *rest = (offsets[w] for w in phrase)
        tf[phrase] = {}
        for doc, starts in first.items():
            n = sum(
                1
                for s in starts
                if all(s + k + 1 in later.get(doc, ()) for k, later in enumerate(rest))
            )
            if n:
                tf[phrase][doc] = n
        if len(phrase) == 1:
            hits[phrase] = lookup.df.get(phrase[0], 0)
        else:
            hits[phrase] = int(
                conn.execute(
                    "SELECT count(*) FROM body WHERE body MATCH ?", (phrase_text(phrase),)
                ).fetchone()[0]
            )
    return StoreCounts(int(rows), int(tokens), phrases, hits, tf, sizes, dict(lookup.df))


def choose_words(lookups: Sequence[Lookup | None], terms: list[str]) -> None:
    """Set the words each store looks up (``kept``) by the counts of all the stores
    searched together: a word is common or rare among all their chunks."""
    found = [lookup for lookup in lookups if lookup is not None]
    if len(found) < 2:
        return
    df: dict[str, int] = {}
    for lookup in found:
        for word, n in lookup.df.items():
            df[word] = df.get(word, 0) + n
    total = sum(lookup.total for lookup in found)
    for lookup in found:
        lookup.kept = worth(lookup, terms, df, total)


def _idf(rows: int, hits: int) -> float:
    idf = math.log((rows - hits + 0.5) / (hits + 0.5)) if rows else 0.0
    return idf if idf > 0 else IDF_FLOOR


def rescore(found: Sequence[Found], counts: Mapping[int, StoreCounts]) -> list[Found]:
    """``found`` (chunks of the stores ``counts`` describes, by target) scored with
    ``bm25()``'s formula over the stores' counts together."""
    rows = sum(c.rows for c in counts.values())
    tokens = sum(c.tokens for c in counts.values())
    average = tokens / rows if rows else 1.0
    every = {p for c in counts.values() for p in c.phrases}
    idf = {p: _idf(rows, sum(c.chunks_holding(p) for c in counts.values())) for p in every}
    out: list[Found] = []
    for f in found:
        c = counts.get(f.target)
        if c is None:
            out.append(f)
            continue
        norm = K1 * (1 - B + B * c.sizes.get(f.chunk, average) / (average or 1.0))
        score = 0.0
        for phrase in c.phrases:
            n = c.tf[phrase].get(f.chunk, 0)
            if n:
                score += idf[phrase] * n * (K1 + 1) / (n + norm)
        out.append(replace(f, score=score))
    return out
