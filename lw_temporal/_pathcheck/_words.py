"""One argument of a command as bash reads it: its literal text, and its tilde.

Quoting decides what bash expands, so it decides what the pre-check may take for a
path: ``'~> 1.0'`` and ``"~"`` are text, ``~`` and ``~/x`` are the home folder,
``~name`` is that user's home only when the sandbox knows the name (bash leaves
``~nosuch`` as it is), ``~+`` and ``~-`` are the working folder and the previous one
(``$OLDPWD``; as written when that is unset). A tilde-prefix (everything up to the
first unquoted ``/``) holding any quoted or expanded character is not expanded.
"""

from __future__ import annotations

from typing import NamedTuple

import tree_sitter


class Word(NamedTuple):
    """``text`` is the literal value, up to the first expansion when not ``complete``;
    with ``tilde`` set (the login name after ``~``, ``""`` for the home folder), bash
    expands that prefix and ``text`` is what follows it (``""`` or from a ``/``)."""

    text: str
    complete: bool
    tilde: str | None = None


def unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    chars = iter(text)
    for ch in chars:
        if ch == "\\":
            out.append(next(chars, ""))
        else:
            out.append(ch)
    return "".join(out)


def node_text(node: tree_sitter.Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogateescape")


def static(node: tree_sitter.Node) -> tuple[str, bool]:
    """The literal text of an argument and whether it is complete (no expansion).

    An incomplete value keeps the literal prefix up to the first expansion, so
    ``/etc/$x`` is still checked as a path under ``/etc``.
    """
    kind = node.type
    if kind in ("word", "number"):
        return unescape(node_text(node)), True
    if kind == "raw_string":
        return node_text(node)[1:-1], True
    if kind == "string":
        parts: list[str] = []
        for child in node.children:
            if child.type == '"':
                continue
            if child.type == "string_content":
                parts.append(node_text(child))
            else:
                return "".join(parts), False
        return "".join(parts), True
    if kind == "concatenation":
        parts = []
        for child in node.children:
            # The grammar keeps concatenations flat; one nested in another is not read
            # (and so not recursed into), which leaves the value incomplete.
            value, complete = static(child) if child.type != "concatenation" else ("", False)
            parts.append(value)
            if not complete:
                return "".join(parts), False
        return "".join(parts), True
    return "", False


def read_word(node: tree_sitter.Node) -> Word:
    """The argument ``node`` as bash reads it (see the module docstring)."""
    text, complete = static(node)
    first = node.children[0] if node.type == "concatenation" and node.children else node
    if first.type != "word" or not text.startswith("~"):
        return Word(text, complete)
    raw = node_text(first)
    if not raw.startswith("~"):  # ``\~``: an escaped tilde is text
        return Word(text, complete)
    slash = raw.find("/")
    if slash < 0 and first is not node:
        return Word(text, complete)  # the prefix runs into a quoted or expanded part
    prefix = raw[1:] if slash < 0 else raw[1:slash]
    if "\\" in prefix:
        return Word(text, complete)
    return Word(text[1 + len(prefix) :], complete, prefix)
