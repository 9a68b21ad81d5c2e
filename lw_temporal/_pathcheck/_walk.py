"""The walk over one parsed command: the paths it names, in the folder it names them.

The working folder is followed the way bash changes it: ``cd``, ``pushd`` and
``popd`` (``cd -`` and ``~-`` through ``$OLDPWD``), undone at the end of whatever
bash runs in a subshell (``(...)``, ``$(...)``, ``<(...)``, each part of a pipeline,
a command sent to the background); a ``cd`` that may or may not have run (in a loop,
an ``if`` or ``case`` branch, after ``||``) leaves the folder unknown afterwards, as
does one whose destination is built at run time. Relative paths named where the
folder is unknown are not checked (the kernel holds), and the folder each recursive
listing ran in is kept for the listing filter.

Every traversal is iterative (an explicit stack), so no input depth can exhaust
Python's stack.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath

import tree_sitter

from .._mode import Mode
from .._sandbox._accounts import homes
from .._scope import Scope
from ._canon import Deadline, canonicalize, reaches
from ._commands import CHDIR, read_command
from ._words import Word, node_text, read_word

_GLOB_CHARS = "*?[{"
_WRITE_REDIRECTS = frozenset({">", ">>", "&>", "&>>", ">|", "<>"})
_DUP_REDIRECTS = frozenset({">&", "<&", ">&-", "<&-"})
#: Node types that open a nesting level (where bash's own parser recurses).
NESTING_NODES = frozenset(
    {
        "command_substitution",
        "process_substitution",
        "subshell",
        "compound_statement",
        "if_statement",
        "while_statement",
        "for_statement",
        "c_style_for_statement",
        "case_statement",
        "function_definition",
        "expansion",
        "arithmetic_expansion",
        "parenthesized_expression",
        "test_command",
    }
)
#: Run in a subshell: the working folder is the same again afterwards.
_SUBSHELLS = frozenset(
    {"subshell", "command_substitution", "process_substitution", "function_definition"}
)
#: Run zero, one or many times: a folder changed inside is unknown afterwards.
_BRANCHES = frozenset(
    {"if_statement", "case_statement", "while_statement", "for_statement", "c_style_for_statement"}
)
#: ``$OLDPWD`` before any ``cd``: unset, so ``~-`` stays as written and ``cd -`` fails.
_UNSET = PurePosixPath("-unset-")


@dataclass
class _Folder:
    """Where the shell is: ``cwd`` None when unknown."""

    cwd: PurePosixPath | None
    oldpwd: PurePosixPath | None = _UNSET
    stack: tuple[PurePosixPath | None, ...] = ()


@dataclass
class Walk:
    scope: Scope
    folder: _Folder
    deadline: Deadline | None = None
    found: list[tuple[str, Mode]] = field(default_factory=list)
    recursive_listing: bool = False
    #: The working folder of each recursive listing (None: unknown there).
    listing_folders: set[PurePosixPath | None] = field(default_factory=set)
    #: A job is sent to the background (``&``); the command runs ``wait``.
    backgrounds: bool = False
    waits: bool = False
    #: Canonical form of each path, and target of each symlink, already resolved in
    #: this command (one naming a symlink chain many times resolves it once).
    canonical: dict[str, str | None] = field(default_factory=dict)
    links: dict[str, tuple[str, ...] | None] = field(default_factory=dict)

    @classmethod
    def start(cls, scope: Scope, deadline: Deadline | None) -> Walk:
        return cls(scope, _Folder(scope.cwd), deadline)

    @property
    def cwd(self) -> PurePosixPath | None:
        return self.folder.cwd

    def canonicalize(self, virtual: str) -> str | None:
        if virtual not in self.canonical:
            self.canonical[virtual] = canonicalize(self.scope, virtual, self.deadline, self.links)
        return self.canonical[virtual]

    def expand(self, word: Word, cwd: PurePosixPath | None) -> str | None:
        """The word with its tilde expanded as bash would; None when that depends on
        something unknown here."""
        tilde = word.tilde
        if tilde is None:
            return word.text
        base: PurePosixPath | str | None
        if tilde == "":
            base = self.scope.cwd  # HOME is the own scratch
        elif tilde == "+":
            base = cwd
        elif tilde == "-":
            base = self.folder.oldpwd
            if base == _UNSET:
                return "~-" + word.text
        elif tilde.lstrip("+-").isdigit():
            return None  # the directory stack, by position
        else:
            base = homes(str(self.scope.cwd)).get(tilde)
            if base is None:  # bash keeps an unknown ``~name`` as written
                return "~" + tilde + word.text
        return None if base is None else str(base) + word.text

    def absolute(self, word: Word, cwd: PurePosixPath | None) -> str | None:
        """The absolute virtual path a word names (glob and expansion cut at the last
        folder bash would still have read literally), or None for none to check."""
        text = self.expand(word, cwd)
        if text is None:
            return None
        if not word.complete:
            if not text.startswith("/"):
                return None
            text = text[: text.rfind("/") + 1] or "/"
        cut = min((i for i in (text.find(c) for c in _GLOB_CHARS) if i >= 0), default=-1)
        if cut >= 0:
            text = text[:cut]
            text = text[: text.rfind("/") + 1] if "/" in text else ""
            text = text or "."
        if text == "":
            return None
        if text.startswith("/"):
            return text if reaches(text) else None
        if cwd is None:
            return None
        return str(cwd / text)

    def add(self, word: Word, access: Mode) -> None:
        """Record one named path, resolved against the working folder known here."""
        self.add_at(word, access, self.cwd)

    def add_at(self, word: Word, access: Mode, cwd: PurePosixPath | None) -> None:
        """Record one named path, resolved against ``cwd`` (None: unknown); a glob's
        folder is read, what it matches unknown here."""
        path = self.absolute(word, cwd)
        if path is None:
            return
        literal = self.expand(word, cwd) or ""
        if path.endswith("/") and any(c in literal for c in _GLOB_CHARS):
            access = Mode.RO
        self.found.append((path, access))

    def change_dir(self, word: Word | None) -> None:
        """``cd WORD`` (None: ``cd`` alone, the home folder)."""
        here = self.folder
        if word is None:
            target: PurePosixPath | None = self.scope.cwd
        elif word.tilde is None and word.complete and word.text == "-":
            if here.oldpwd == _UNSET:
                return  # bash: "OLDPWD not set", nothing changes
            target = here.oldpwd
        else:
            self.add(word, Mode.RO)
            target = self.destination(word)
        self.folder = _Folder(target, here.cwd, here.stack)

    def destination(self, word: Word) -> PurePosixPath | None:
        """The folder ``cd WORD`` leads to from here, None when it cannot be known."""
        if not word.complete:
            return None
        text = self.expand(word, self.cwd)
        if text is None or any(c in text for c in _GLOB_CHARS):
            return None
        if not text.startswith("/"):
            if self.cwd is None:
                return None
            text = str(self.cwd / text)
        elif not reaches(text):
            return None  # cd fails there: where the shell stays is not worth guessing
        canonical = self.canonicalize(text)
        return None if canonical is None else PurePosixPath(canonical)

    def push_dir(self, word: Word | None) -> None:
        here = self.folder
        if word is None:  # swap the top two
            if not here.stack:
                return
            self.folder = _Folder(here.stack[-1], here.cwd, (*here.stack[:-1], here.cwd))
            return
        self.change_dir(word)
        self.folder.stack = (*here.stack, here.cwd)

    def pop_dir(self, has_arguments: bool) -> None:
        here = self.folder
        if not here.stack:
            return  # bash: "directory stack empty"
        if has_arguments:  # ``popd +N``: which one goes is not followed
            self.folder = _Folder(None, here.oldpwd, ())
            return
        self.folder = _Folder(here.stack[-1], here.cwd, here.stack[:-1])


def _arguments(node: tree_sitter.Node) -> tuple[str | None, list[Word]]:
    name: str | None = None
    words: list[Word] = []
    for child in node.children:
        if child.type == "command_name":
            inner = child.children[0] if child.children else child
            word = read_word(inner)
            name = word.text if word.complete and word.tilde is None else None
        elif child.is_named and child.type not in (
            "variable_assignment",
            "file_redirect",
            "herestring_redirect",
        ):
            words.append(read_word(child))
    return name, words


def visit_command(node: tree_sitter.Node, walk: Walk) -> None:
    name, words = _arguments(node)
    command = read_command(name, words)
    base = command.base
    walk.waits = walk.waits or base == "wait"
    if base in CHDIR:
        operands = [w for w, _ in command.operands]
        if base == "popd":
            walk.pop_dir(bool(operands))
        elif base == "pushd":
            walk.push_dir(operands[0] if operands else None)
        else:
            walk.change_dir(operands[0] if operands else None)
        return
    cwd = walk.cwd
    if command.directory is not None:  # ``git -C DIR``: it runs in DIR
        walk.add(command.directory, Mode.RO)
        cwd = walk.destination(command.directory)
    if command.lists_recursively:
        walk.recursive_listing = True
        walk.listing_folders.add(cwd)
    for word in command.option_paths:
        walk.add_at(word, Mode.RO, cwd)
    for word, access in command.operands:
        text = word.text
        named = command.takes_files or access is Mode.RW
        if named or word.tilde is not None or text.startswith("/") or _climbs(text):
            walk.add_at(word, access, cwd)


def _climbs(text: str) -> bool:
    return "../" in text or text == ".." or text.endswith("/..")


def visit_redirect(node: tree_sitter.Node, walk: Walk) -> None:
    operator: str | None = None
    destinations: list[tree_sitter.Node] = []
    for child in node.children:
        if child.type == "file_descriptor":
            continue
        if child.type == "ERROR":  # ``<>`` read as ``<`` and a stray ``>``
            if operator == "<" and ">" in node_text(child):
                operator = "<>"
            continue
        if not child.is_named:
            operator = node_text(child)
        else:
            destinations.append(child)
    if not destinations or operator is None:
        return
    first, *rest = destinations
    if operator not in _DUP_REDIRECTS and not (operator in (">&", "<&") and first.type == "number"):
        access = Mode.RW if operator in _WRITE_REDIRECTS else Mode.RO
        walk.add(read_word(first), access)
    for extra in rest:  # `cat 2>&1 file`: the grammar files `file` under the redirect
        word = read_word(extra)
        if word.tilde is not None or word.text.startswith("/") or "../" in word.text:
            walk.add(word, Mode.RO)


_BEGIN, _END = "begin", "end"
#: Node types whose children may run in a scope of their own (see _scoped_children).
_SEQUENCES = frozenset(
    {"program", "list", "pipeline", "compound_statement", "do_group", "subshell",
     "else_clause", "elif_clause", "if_statement", "case_item", "redirected_statement"}
)  # fmt: skip


def walk_tree(root: tree_sitter.Node, walk: Walk) -> int:
    """Visit every command and redirection in the order bash runs them, following the
    working folder (see the module docstring); returns the deepest nesting level."""
    # Entries: (node, level), or ((_BEGIN | _END, subshell?), level) around a scope.
    stack: list[tuple[tree_sitter.Node | tuple[str, bool], int]] = [(root, 0)]
    saved: list[_Folder] = []
    deepest = 0
    count = 0
    deadline = walk.deadline
    while stack:
        item, level = stack.pop()
        count += 1
        if deadline is not None and not count & 255:
            deadline.check()
        if isinstance(item, tuple):
            mark, subshell = item
            if mark == _BEGIN:
                here = walk.folder
                saved.append(_Folder(here.cwd, here.oldpwd, here.stack))
            else:
                before = saved.pop()
                if subshell:
                    walk.folder = before
                elif (walk.folder.cwd, walk.folder.stack) != (before.cwd, before.stack):
                    walk.folder = _Folder(None, None, ())
            continue
        children = item.children
        if not children:
            walk.backgrounds = walk.backgrounds or item.type == "&"
            continue
        kind = item.type
        if kind == "command":
            visit_command(item, walk)
        elif kind == "file_redirect":
            visit_redirect(item, walk)
        inner = level + (kind in NESTING_NODES)
        deepest = max(deepest, inner)
        scoped = _scoped_children(item) if kind in _SEQUENCES else {}
        whole = kind in _SUBSHELLS or kind in _BRANCHES
        if whole:
            stack.append(((_END, kind in _SUBSHELLS), inner))
        for index in range(len(children) - 1, -1, -1):
            how = scoped.get(index)
            if how is None:
                stack.append((children[index], inner))
            else:
                stack += [((_END, how), inner), (children[index], inner), ((_BEGIN, how), inner)]
        if whole:
            stack.append(((_BEGIN, kind in _SUBSHELLS), inner))
    return deepest


def _scoped_children(node: tree_sitter.Node) -> dict[int, bool]:
    """Children of ``node`` bash runs in a scope of their own: {index: subshell?}
    (pipeline parts and background commands are subshells; the right side of
    ``||`` may not run at all)."""
    kind = node.type
    children = node.children
    scoped: dict[int, bool] = {}
    if kind == "pipeline":
        for index, child in enumerate(children):
            if child.is_named:
                scoped[index] = True
    elif kind == "list":
        for index, child in enumerate(children):
            if child.is_named and index > 0 and children[index - 1].type == "||":
                scoped[index] = False
    for index, child in enumerate(children[:-1]):
        if child.is_named and children[index + 1].type == "&":
            scoped[index] = True
    return scoped
