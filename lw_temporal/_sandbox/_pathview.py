"""Path translation for a backend without a mount namespace (Landlock, unsandboxed).

Such a backend cannot show the spec's folders at their ``/mnt/...`` targets, so it
rewrites the literal paths of the command to the real folders before the run and maps
the real folders back to their virtual names in the output. ``/mnt`` itself becomes a
folder of symlinks, so that listing the folders above the mounts still works. This is
the backend's business: the caller hands over a spec and gets the output back in the
agent's own names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import tree_sitter
import tree_sitter_bash

from ._spec import SandboxSpec

#: The argv shape whose script the translation rewrites.
_SHELL = ("/bin/bash", "-c")
#: Besides ``--option=``, the ``key=`` of a word whose value the pre-check reads as a
#: path (``dd``'s operands).
_VALUE_KEYS = (b"if", b"of")


@cache
def _parser() -> tree_sitter.Parser:
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def view_dir(spec: SandboxSpec) -> Path:
    assert spec.private_dir is not None, "a backend without a mount view needs private_dir"
    return spec.private_dir / "view"


def path_map(spec: SandboxSpec, extra: Sequence[tuple[str, str]] = ()) -> list[tuple[str, str]]:
    """(virtual prefix, real path) pairs, longest prefixes first: each mount's target
    maps to its real folder, ``/mnt`` itself to the folder of symlinks, and ``extra``
    (the backend's own, e.g. ``/tmp`` to the command's private folder)."""
    pairs = [(str(m.target), str(m.source)) for m in spec.mounts]
    pairs.append(("/mnt", str(view_dir(spec) / "mnt")))
    pairs += extra
    return sorted(pairs, key=lambda pair: -len(pair[0]))


def build_view(spec: SandboxSpec) -> Path:
    """A folder of symlinks standing in for the mount view; returns it."""
    view = view_dir(spec)
    for mount in spec.mounts:
        link = view.joinpath(*mount.target.parts[1:])
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to(mount.source)
    view.mkdir(parents=True, exist_ok=True)
    return view


def translated(spec: SandboxSpec, extra: Sequence[tuple[str, str]] = ()) -> SandboxSpec:
    """``spec`` with the literal ``/mnt`` paths (and ``extra`` ones) of its shell
    script rewritten."""
    if spec.argv[:2] != _SHELL or len(spec.argv) != 3:
        return spec
    script = rewrite_paths(spec.argv[2], path_map(spec, extra))
    return dataclasses.replace(spec, argv=(*_SHELL, script))


def untranslated(spec: SandboxSpec, text: str, extra: Sequence[tuple[str, str]] = ()) -> str:
    """The real folders in ``text`` under their virtual names again (longest real
    path first, so nested mounts map right)."""
    for virtual, real in sorted(path_map(spec, extra), key=lambda pair: -len(pair[1])):
        text = text.replace(real, virtual)
    return text


def rewrite_paths(command: str, mapping: list[tuple[str, str]]) -> str:
    """``command`` with each literal word that starts with a virtual prefix of
    ``mapping`` (longest first) moved to its replacement, and so the value of an
    ``--option=`` or ``dd`` ``if=``/``of=`` word, as the pre-check reads them. Only
    words the parser sees as literal are touched; paths built at run time are not, and
    then do not resolve."""
    data = command.encode("utf-8", "surrogateescape")
    tree = _parser().parse(data)
    pairs = [(v.encode(), r.encode("utf-8", "surrogateescape")) for v, r in mapping]
    edits: list[tuple[int, int, bytes]] = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type in ("heredoc_body", "comment"):
            continue
        if node.type in ("word", "string_content", "raw_string"):
            offset = 1 if node.type == "raw_string" else 0
            body = (node.text or b"")[offset:]
            key, equals, value = body.partition(b"=")
            if equals and (key.startswith(b"--") or key in _VALUE_KEYS):
                offset, body = offset + len(key) + 1, value  # --file=/mnt/..., of=/mnt/...
            for virtual, real in pairs:
                if body == virtual or body.startswith(virtual + b"/"):
                    start = node.start_byte + offset
                    edits.append((start, start + len(virtual), real))
                    break
            continue
        stack.extend(node.children)
    pieces: list[bytes] = []
    done = 0
    for start, end, real in sorted(edits):
        pieces += [data[done:start], real]
        done = end
    pieces.append(data[done:])
    return b"".join(pieces).decode("utf-8", "surrogateescape")
