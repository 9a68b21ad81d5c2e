"""Cutting a file into the pieces the search index ranks, and a query into its words.

A chunk is whole paragraphs (lines up to and including a blank line) up to
:data:`CHUNK_BYTES`; a longer paragraph is cut between lines, a longer line at a UTF-8
boundary. Each chunk knows its byte offset and the number of its first line, so a hit
names line numbers without reading the file again.

Every cut depends only on the bytes from the chunk's own start onward, and an append
only ever makes the last paragraph or line longer. So chunking again from the start of
a file's last chunk gives exactly what chunking the whole file would: an append
re-indexes its last chunk and the ones it adds, never the rest of the file.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import unicodedata
from dataclasses import dataclass

#: Most bytes of one chunk (a paragraph or line longer than this is cut).
CHUNK_BYTES = 1536
#: A file whose first bytes hold a NUL is binary: kept track of, not indexed.
BINARY_PROBE = 8192
#: Most distinct words of a query that are looked up.
MAX_QUERY_TERMS = 32

_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True, slots=True)
class Chunk:
    """One piece of a file: its byte offset, the number of its first line (from 1)
    and its bytes."""

    start: int
    line: int
    data: bytes

    @property
    def sha(self) -> str:
        """What the index keys a chunk's text (and its embedding) by."""
        return hashlib.sha256(self.data).hexdigest()[:32]

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


def is_binary(data: bytes) -> bool:
    return b"\x00" in data[:BINARY_PROBE]


def chunks(data: bytes, *, offset: int = 0, line: int = 1) -> list[Chunk]:
    """The chunks of ``data``, which starts at byte ``offset`` (and line ``line``) of
    its file."""
    out: list[Chunk] = []
    pos = 0
    while pos < len(data):
        end = _chunk_end(data, pos)
        piece = data[pos:end]
        out.append(Chunk(offset + pos, line, piece))
        line += piece.count(b"\n")
        pos = end
    return out


def _line_end(data: bytes, pos: int) -> int:
    found = data.find(b"\n", pos)
    return len(data) if found < 0 else found + 1


def _paragraph_end(data: bytes, pos: int) -> int:
    """Where the paragraph from ``pos`` ends: after its first whole blank line, or at
    the end of ``data``. Only whole lines decide (a last line without its newline may
    still become anything), so an append can only move the end of the last one on."""
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            return len(data)
        if not data[pos:end].strip():
            return end + 1
        pos = end + 1
    return pos


def _chunk_end(data: bytes, pos: int) -> int:
    end = pos
    while end < len(data):  # whole paragraphs while they fit
        after = _paragraph_end(data, end)
        if after - pos > CHUNK_BYTES:
            break
        end = after
    if end > pos:
        return end
    while end < len(data):  # the first paragraph alone is too long: whole lines
        after = _line_end(data, end)
        if after - pos > CHUNK_BYTES:
            break
        end = after
    if end > pos:
        return end
    cut = pos + CHUNK_BYTES  # one line longer than a chunk: at a UTF-8 boundary
    while cut > pos + 1 and data[cut] & 0xC0 == 0x80:
        cut -= 1
    return cut


def fold(text: str) -> str:
    """Lower case without diacritics: when two words of a query are one word."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def query_terms(query: str) -> list[str]:
    """The distinct words of ``query`` (alike but for case and accents: one), in order,
    at most :data:`MAX_QUERY_TERMS`. A word is kept as written (composed, NFKC): the
    index's tokenizer folds case and Latin accents itself, and a word taken apart
    would not be found (NFKD cuts a Korean syllable into jamo and splits the voicing
    mark off a Japanese kana, which the index holds whole)."""
    words: dict[str, str] = {}
    for word in _WORD.findall(unicodedata.normalize("NFKC", query)):
        words.setdefault(fold(word), word.lower())
    return list(words.values())[:MAX_QUERY_TERMS]


def phrases(terms: list[str], query: list[str] | None = None) -> list[tuple[str, ...]]:
    """The phrases an FTS5 query of ``terms`` looks for: each word, then each pair of
    them that stands side by side in ``query``."""
    kept = set(terms)
    order = query or []
    return [(t,) for t in terms] + [(a, b) for a, b in itertools.pairwise(order) if {a, b} <= kept]


def phrase_text(words: tuple[str, ...]) -> str:
    """One phrase of an FTS5 query, quoted so that no word is read as an operator."""
    return '"' + " ".join(words).replace('"', '""') + '"'


def match_expression(terms: list[str], query: list[str] | None = None) -> str:
    """An FTS5 query matching any of ``terms``, each quoted so that no word of a query is
    read as an operator (``NEAR``, ``OR``, ``*``, a column filter); and each pair of
    them that stands side by side in ``query`` as a phrase, so a note holding the pair
    as the question does ranks above one holding the words apart."""
    return " OR ".join(phrase_text(p) for p in phrases(terms, query))
