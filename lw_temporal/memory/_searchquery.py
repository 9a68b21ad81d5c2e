"""Ranking one query over the search indexes of several stores.

By words: BM25 over chunks, SQLite FTS5's own ``bm25()`` (Porter stemming, case and
diacritics folded; every word of the query is quoted, so none is read as an
operator). By meaning, when an :class:`~._search.Embedder` is configured: the cosine of
the query's vector and each chunk's. Both: reciprocal rank fusion (each list gives a
chunk ``1 / (60 + rank)``), which needs no calibration between BM25 scores and
cosines. A file's score is its best chunk's; its lines are those of its best chunks
that hold a query word (FTS5's ``highlight()`` marks them), else their first lines.
"""

from __future__ import annotations

import heapq
import math
import operator
import sqlite3
import threading
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ._records import SearchHit, SearchLine

#: Chunks by words taken from each store before they are grouped into files.
LEXICAL_CAP = 200
#: Chunks one store ranks by words at most (about): the sum, over the words looked up,
#: of the chunks that hold each.
RANK_BUDGET = 5000
#: Chunks by meaning taken from each store.
SEMANTIC_CAP = 200
#: Reciprocal rank fusion's constant (Cormack et al.'s 60).
RRF_K = 60
#: A chunk scoring under this share of the best one by words matched only words that
#: most chunks hold (FTS5 floors their weight), and is left out.
NOISE_SHARE = 1e-3
#: Lines shown per hit, chunks they are taken from, characters per line.
HIT_LINES = 5
HIT_CHUNKS = 3
LINE_CHARS = 240
_MARK, _END = "\ue000", "\ue001"  # private-use characters: what highlight() wraps words in


@dataclass(frozen=True, slots=True)
class Found:
    """One chunk a store's index found: which store (``target``), which chunk, its
    file, and its score in the list that found it (higher is better)."""

    target: int
    chunk: int
    path: str
    line: int
    score: float


def _prefix_filter(prefix: str) -> tuple[str, tuple[str, ...]]:
    """SQL (on ``c.path``) for the files at or below ``prefix`` (a file or folder)."""
    if not prefix:
        return "", ()
    return " AND (c.path = ? OR (c.path >= ? AND c.path < ?))", (prefix, f"{prefix}/", f"{prefix}0")


_TOKENIZE = "tokenize = 'porter unicode61 remove_diacritics 2'"  # as the index's
_TEMP = (
    f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.lw_words USING fts5(t, {_TOKENIZE})",
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.lw_stems USING fts5vocab(temp, lw_words, instance)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.lw_terms USING fts5vocab(main, body, row)",
)


def _temporary(conn: sqlite3.Connection, statement: str) -> None:
    """Run ``statement`` on this connection's temporary tables (made on first use)."""
    try:
        conn.execute(statement)
    except sqlite3.OperationalError:
        for create in _TEMP:
            conn.execute(create)
        conn.execute(statement)


@dataclass(slots=True)
class Lookup:
    """What one index holds of a query's words: those worth looking up (``kept``), each
    present word's stem as the index has it and the chunks holding it (``df``), the
    index's chunks (``total``), and whether every word is one token there (``simple``)."""

    kept: list[str]
    stems: dict[str, str] = field(default_factory=dict)
    df: dict[str, int] = field(default_factory=dict)
    total: int = 0
    simple: bool = True


def worth(lookup: Lookup, words: list[str], df: dict[str, int], total: int) -> list[str]:
    """The words of ``words`` worth looking up in ``lookup``'s index, rarest first (by
    ``df`` among ``total`` chunks: the index's own, or those of every store searched
    together) while the chunks holding them there stay within :data:`RANK_BUDGET`:
    ranking costs per chunk that holds any of them, and the words left out are the
    commonest, which BM25 weighs least (those in half the chunks or more not at all).
    Words the index does not hold are left out too; if every word is in half the
    chunks, the rarest three are kept."""
    present = sorted((df[w], i, w) for i, w in enumerate(words) if lookup.df.get(w, 0))
    useful = [(n, i, w) for n, i, w in present if n * 2 < total] or present[:3]
    kept: list[tuple[int, str]] = []
    rows = 0
    for _n, i, w in useful:
        here = lookup.df[w]
        if kept and rows + here > RANK_BUDGET:
            break
        kept.append((i, w))
        rows += here
    return [w for _i, w in sorted(kept)]


def informative(conn: sqlite3.Connection, words: list[str]) -> Lookup:
    """What this index holds of ``words``, and those worth looking up in it alone
    (:func:`worth`)."""
    _temporary(conn, "DELETE FROM temp.lw_words")
    conn.executemany("INSERT INTO temp.lw_words(rowid, t) VALUES(?, ?)", enumerate(words))
    tokens = conn.execute("SELECT doc, term FROM temp.lw_stems").fetchall()
    stems = dict(tokens)
    wanted = sorted(set(stems.values()))
    if not wanted:
        return Lookup([])
    marks = ",".join("?" * len(wanted))
    df = dict(conn.execute(f"SELECT term, doc FROM temp.lw_terms WHERE term IN ({marks})", wanted))
    total = int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
    lookup = Lookup(
        kept=[],
        stems={w: str(stems[i]) for i, w in enumerate(words) if df.get(stems.get(i), 0)},
        df={w: int(df[stems[i]]) for i, w in enumerate(words) if df.get(stems.get(i), 0)},
        total=total,
        simple=len(tokens) == len(stems),
    )
    lookup.kept = worth(lookup, words, lookup.df, total)
    return lookup


def lexical(conn: sqlite3.Connection, target: int, expr: str, prefix: str) -> list[Found]:
    """The chunks matching ``expr``, best first, at most :data:`LEXICAL_CAP`."""
    if prefix:
        where, args = _prefix_filter(prefix)
        rows = conn.execute(
            "SELECT c.id, c.path, c.line, bm25(body) AS s FROM body JOIN chunks c ON c.id = "
            f"body.rowid WHERE body MATCH ?{where} ORDER BY s LIMIT ?",
            (expr, *args, LEXICAL_CAP),
        ).fetchall()
    else:  # ranked inside FTS5, joined for the few it returns
        rows = conn.execute(
            "SELECT c.id, c.path, c.line, r.rank FROM (SELECT rowid, rank FROM body WHERE "
            "body MATCH ? ORDER BY rank LIMIT ?) r JOIN chunks c ON c.id = r.rowid",
            (expr, LEXICAL_CAP),
        ).fetchall()
    return [Found(target, int(i), str(p), int(n), -float(s)) for i, p, n, s in rows]


def texts(conn: sqlite3.Connection, ids: Iterable[int], expr: str | None) -> dict[int, str]:
    """The text of chunks ``ids``, with the words of ``expr`` marked when given."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    marks = ",".join("?" * len(wanted))
    if expr is None:
        rows = conn.execute(f"SELECT rowid, text FROM body WHERE rowid IN ({marks})", wanted)
    else:
        rows = conn.execute(
            f"SELECT rowid, highlight(body, 0, '{_MARK}', '{_END}') FROM body "
            f"WHERE body MATCH ? AND rowid IN ({marks})",
            (expr, *wanted),
        )
    return {int(i): str(t) for i, t in rows.fetchall()}


# -- vectors ---------------------------------------------------------------------------


def unit(vector: Sequence[float]) -> array[float]:
    """``vector`` scaled to length 1, as 32-bit floats (a cosine is then a dot); an
    embedder's vector that is not finite numbers is refused."""
    values = [float(x) for x in vector]
    norm = math.sqrt(sum(x * x for x in values))
    if not values or not math.isfinite(norm):
        raise ValueError("the embedder returned an empty or non-finite vector")
    return array("f", (x / (norm or 1.0) for x in values))


#: (chunk id, path, first line, sha, whether it has a vector of the model asked).
ChunkRow = tuple[int, str, int, str, bool]


def chunk_rows(conn: sqlite3.Connection, model: str, prefix: str) -> list[ChunkRow]:
    """Every chunk of the index (or of ``prefix``), and whether it has a vector."""
    where, args = _prefix_filter(prefix)
    rows = conn.execute(
        "SELECT c.id, c.path, c.line, c.sha, v.sha IS NOT NULL FROM chunks c LEFT JOIN "
        f"vectors v ON v.sha = c.sha AND v.model = ? WHERE 1{where}",
        (model, *args),
    ).fetchall()
    return [(int(i), str(p), int(n), str(s), bool(h)) for i, p, n, s, h in rows]


def store_vectors(
    conn: sqlite3.Connection, model: str, items: Sequence[tuple[str, array[float]]]
) -> None:
    """Keep vectors by chunk sha, in one transaction: one whose chunk is gone by now (a
    commit removed it, a redaction among them) is not kept; vectors no chunk has any
    more (left by commits, which do not tidy them) go."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        marks = ",".join("?" * len(items))
        live = {
            str(r[0])
            for r in conn.execute(
                f"SELECT DISTINCT sha FROM chunks WHERE sha IN ({marks})", [s for s, _v in items]
            ).fetchall()
        }
        conn.executemany(
            "INSERT OR REPLACE INTO vectors(sha, model, vec) VALUES(?, ?, ?)",
            [(sha, model, vec.tobytes()) for sha, vec in items if sha in live],
        )
        conn.execute(
            "DELETE FROM vectors WHERE model = ? AND sha NOT IN (SELECT sha FROM chunks)",
            (model,),
        )
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


#: Unit vectors by (model, chunk sha), with their first :data:`COARSE_DIMS`, shared by
#: every index of this process: a chunk's vector never changes, so a search reads from
#: SQLite only those it has not seen.
_VECTORS: dict[tuple[str, str], tuple[array[float], array[float]]] = {}
_VECTORS_MAX = 200_000
_VECTORS_LOCK = threading.Lock()
#: Past this many vectors, all are first scored on their first ``COARSE_DIMS``
#: dimensions and only the best ``COARSE_KEEP`` on all of them (a vector's head is an
#: embedding of its own for Matryoshka-trained models such as OpenAI's text-embedding-3,
#: and a fair sample of the rest for others).
COARSE_DIMS, COARSE_KEEP = 64, 500


def _vectors(
    conn: sqlite3.Connection, model: str, shas: set[str]
) -> dict[str, tuple[array[float], array[float]]]:
    with _VECTORS_LOCK:
        found = {s: v for s in shas if (v := _VECTORS.get((model, s))) is not None}
    missing = sorted(shas - set(found))
    loaded: dict[str, tuple[array[float], array[float]]] = {}
    for start in range(0, len(missing), 500):
        part = missing[start : start + 500]
        marks = ",".join("?" * len(part))
        rows = conn.execute(
            f"SELECT sha, vec FROM vectors WHERE model = ? AND sha IN ({marks})", (model, *part)
        ).fetchall()
        for sha, blob in rows:
            vec = array("f")
            vec.frombytes(blob)
            loaded[str(sha)] = (vec, vec[:COARSE_DIMS])
    with _VECTORS_LOCK:
        if len(_VECTORS) + len(loaded) > _VECTORS_MAX:
            _VECTORS.clear()
        _VECTORS.update({(model, s): v for s, v in loaded.items()})
    return found | loaded


def semantic(
    conn: sqlite3.Connection,
    target: int,
    model: str,
    rows: Sequence[ChunkRow],
    query: array[float],
) -> list[Found]:
    """The chunks of ``rows`` closest in meaning to ``query``, best first, at most
    :data:`SEMANTIC_CAP` (each distinct text scored once)."""
    vectors = _vectors(conn, model, {r[3] for r in rows})
    vectors = {s: v for s, v in vectors.items() if len(v[0]) == len(query)}
    mul = operator.mul
    shortlist: Iterable[str] = vectors
    if len(vectors) > 4 * COARSE_KEEP and len(query) >= 2 * COARSE_DIMS:
        head = query[:COARSE_DIMS]
        coarse = {sha: sum(map(mul, head, v[1])) for sha, v in vectors.items()}
        shortlist = heapq.nlargest(COARSE_KEEP, coarse, key=coarse.__getitem__)
    score = {sha: sum(map(mul, query, vectors[sha][0])) for sha in shortlist}
    best = heapq.nlargest(
        SEMANTIC_CAP, (r for r in rows if r[3] in score), key=lambda r: score[r[3]]
    )
    return [Found(target, i, p, n, score[sha]) for i, p, n, sha, _has in best]


# -- fusion and hits --------------------------------------------------------------------


@dataclass
class FileHit:
    """A file being ranked: its score and its chunks, best first."""

    target: int
    path: str
    score: float
    chunks: list[Found] = field(default_factory=list)
    by_words: set[int] = field(default_factory=set)


def fuse(words: list[Found], meaning: list[Found]) -> list[FileHit]:
    """Files ranked by their best chunk: by BM25 alone, or by reciprocal rank fusion
    of the two lists when there is a list by meaning."""
    scores: dict[tuple[int, int], float] = {}
    found: dict[tuple[int, int], Found] = {}
    ranked_words = sorted(words, key=lambda f: -f.score)
    if ranked_words:
        floor = ranked_words[0].score * NOISE_SHARE
        ranked_words = [f for f in ranked_words if f.score >= floor]
    if not meaning:
        for f in ranked_words:
            scores[(f.target, f.chunk)] = f.score
            found[(f.target, f.chunk)] = f
    else:
        for ranked in (ranked_words, sorted(meaning, key=lambda f: -f.score)):
            for rank, f in enumerate(ranked):
                key = (f.target, f.chunk)
                scores[key] = scores.get(key, 0.0) + 1.0 / (RRF_K + rank + 1)
                found.setdefault(key, f)
    lexical_keys = {(f.target, f.chunk) for f in ranked_words}
    files: dict[tuple[int, str], FileHit] = {}
    for key in sorted(scores, key=lambda k: -scores[k]):
        f = found[key]
        hit = files.setdefault((f.target, f.path), FileHit(f.target, f.path, scores[key]))
        hit.chunks.append(f)
        if key in lexical_keys:
            hit.by_words.add(f.chunk)
    return sorted(files.values(), key=lambda h: -h.score)


def clip_line(text: str) -> str:
    """A line within :data:`LINE_CHARS`, kept around its first marked word."""
    if len(text) <= LINE_CHARS:
        return text.replace(_MARK, "").replace(_END, "")
    at = max(0, text.find(_MARK) - LINE_CHARS // 3)
    piece = text[at : at + LINE_CHARS].replace(_MARK, "").replace(_END, "")
    return ("..." if at else "") + piece + "..."


def hit_lines(found: Sequence[Found], text_of: dict[int, str]) -> tuple[SearchLine, ...]:
    """The lines a hit shows: those of its best chunks that hold a query word, else
    the first non-blank lines of its best chunk."""
    marked: list[SearchLine] = []
    for f in found[:HIT_CHUNKS]:
        for offset, line in enumerate(text_of.get(f.chunk, "").split("\n")):
            if _MARK in line:
                marked.append(SearchLine(number=f.line + offset, text=clip_line(line)))
    if marked:
        return tuple(sorted(marked, key=lambda s: s.number)[:HIT_LINES])
    first = found[0]
    plain = [
        SearchLine(number=first.line + offset, text=clip_line(line))
        for offset, line in enumerate(text_of.get(first.chunk, "").split("\n"))
        if line.strip()
    ]
    return tuple(plain[:HIT_LINES])


def as_hit(path: str, hit: FileHit, text_of: dict[int, str]) -> SearchHit:
    return SearchHit(path=path, score=round(hit.score, 6), lines=hit_lines(hit.chunks, text_of))
