"""Agent-written text is never terminal input.

Names, summaries, notes, diffs, audit lines and failure messages come from agents (or
from files they wrote), and a terminal obeys what they hold: ``ESC[1A ESC[2K`` erases
the line above, a carriage return or backspaces overwrite what was printed, C1
controls do the same on many terminals, and bidirectional overrides (U+202E...) make a
line read differently from what it holds. Every view of the command line, the demo
and the live tree prints such text through :func:`terminal_safe`, which writes each of
those characters as a visible escape (``\\x1b``, ``\\r``, ``\\u202e``) and keeps newlines
and tabs.
"""

from __future__ import annotations

import re

#: C0 controls but tab and newline, DEL, C1 controls, and the Unicode format
#: characters that reorder or hide text: bidi embeddings, overrides and isolates,
#: the directional marks, the line and paragraph separators, and the zero-width
#: characters that hide where a word ends.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ud800-\udfff\ufeff]"
)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\r":
        return "\\r"
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """``text`` with every character a terminal would act on written as an escape."""
    return _UNSAFE.sub(_escape, text)
