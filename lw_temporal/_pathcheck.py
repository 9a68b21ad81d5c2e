"""Layer 1 of scoped bash: the seeds' "Bash Path Enforcement", before anything runs.

The command is parsed with tree-sitter-bash (a real grammar, so quoting, heredocs,
redirections and substitutions are seen the way bash sees them). Every path the
command *names* is canonicalized against the virtual cwd (``..`` resolved, symlinks
resolved on the real side of their mount) and checked against the scope. The answer
is a refusal in the seeds' words, given to the agent as a normal result so it can
correct itself.

This layer is advice, not the boundary: a path built at run time (``$(...)``,
``eval``, an interpreter) is invisible here, and the kernel sandbox (layer 2) is what
holds against it. A command the parser cannot read is refused (fail closed).

Any command must get an answer, so the check is bounded: a command longer than
:data:`MAX_COMMAND_BYTES`, nested deeper than :data:`MAX_NESTING`, or costing more
than a time budget to check is refused with the limit and the fix. Every traversal is
iterative (an explicit stack), so no input depth can exhaust Python's stack, and the
caller runs the check in a thread so that a slow one never stalls the event loop.

System paths the sandbox shows are part of the allowed roots, read-only:
``/usr`` (and the ``/bin``, ``/sbin``, ``/lib``, ``/lib64`` links into it), the two
``/etc`` entries programs need to start (``ld.so.cache``, ``alternatives``; no
``passwd``, no host configuration), ``/proc`` (the sandbox's own pid namespace) and
the harmless ``/dev`` nodes (``zero``, ``urandom``, ``tty``...; no disks).
Writable but private to the command: ``/tmp`` (a fresh tmpfs), ``/dev/null``,
``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/*``. The folders above the mounts (``/``,
``/mnt``, ``/mnt/memory``...) are readable so that ``ls /mnt`` and ``find /mnt`` work.
"""

from __future__ import annotations

import os
import posixpath
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import PurePosixPath

import tree_sitter
import tree_sitter_bash

from ._mode import Mode
from ._sandbox._spec import SYSTEM_VIEW
from ._scope import Mount, Scope

OUTSIDE = "path is outside the allowed roots"
READ_ONLY = "path is read-only"
UNPARSEABLE = "command could not be parsed"
TOO_LONG = "command is too long"
TOO_DEEP = "command nests too deeply"
TOO_COSTLY = "command names too many paths to check"

#: The longest command checked (bytes of UTF-8); longer ones are refused, not run.
MAX_COMMAND_BYTES = 256 * 1024
#: The most ``$(...)``, ``(...)``, ``{...}``, blocks and expansions nested in one another.
MAX_NESTING = 100
#: Seconds the check of one command (or of one listing's output) may take.
CHECK_BUDGET_SECONDS = 5.0
#: Node types that open a nesting level (where bash's own parser recurses).
_NESTING_NODES = frozenset(
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

#: What the sandbox shows of the host, read from the one system view the backends use.
SYSTEM_READ_ONLY: tuple[str, ...] = SYSTEM_VIEW.read_only
#: Folders that may be listed but hold nothing of their own to allow beyond the above.
_LISTABLE = SYSTEM_VIEW.listable
#: Writable places private to one command (discarded when it ends).
PRIVATE_WRITABLE: tuple[str, ...] = SYSTEM_VIEW.writable

_WRITE_ALL = frozenset(
    {
        "rm",
        "rmdir",
        "mkdir",
        "touch",
        "truncate",
        "shred",
        "chmod",
        "chown",
        "chgrp",
        "unlink",
        "tee",
        "mkfifo",
        "mknod",
        "mv",
    }
)
_WRITE_LAST = frozenset({"cp", "install", "ln", "rsync"})
_PATTERN_FIRST = frozenset({"grep", "egrep", "fgrep", "rg", "sed", "awk", "mawk", "gawk"})
_FILE_COMMANDS = (
    _WRITE_ALL
    | _WRITE_LAST
    | _PATTERN_FIRST
    | frozenset(
        {
            "cat",
            "ls",
            "head",
            "tail",
            "less",
            "more",
            "wc",
            "stat",
            "file",
            "du",
            "find",
            "tree",
            "diff",
            "cmp",
            "sort",
            "uniq",
            "cut",
            "tac",
            "nl",
            "od",
            "xxd",
            "hexdump",
            "md5sum",
            "sha256sum",
            "sha1sum",
            "readlink",
            "realpath",
            "source",
            ".",
            "tar",
            "zip",
            "unzip",
            "gzip",
            "gunzip",
            "zcat",
            "cd",
            "pushd",
        }
    )
)
#: Commands that run the next word as a command (their own options skipped).
_WRAPPERS = frozenset(
    {"env", "nice", "nohup", "time", "command", "exec", "builtin", "stdbuf", "xargs", "timeout"}
)
_WRITE_REDIRECTS = frozenset({">", ">>", "&>", "&>>", ">|", "<>"})
_DUP_REDIRECTS = frozenset({">&", "<&", ">&-", "<&-"})
_GLOB_CHARS = "*?[{"
_LISTING_COMMANDS = frozenset({"find", "tree", "du"})


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The pre-check's answer: ``rejection`` is the message for the agent, or None."""

    rejection: str | None
    paths: tuple[tuple[str, Mode], ...] = ()
    lists_recursively: bool = False


@cache
def _parser() -> tree_sitter.Parser:
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def _unescape(text: str) -> str:
    out: list[str] = []
    chars = iter(text)
    for ch in chars:
        if ch == "\\":
            out.append(next(chars, ""))
        else:
            out.append(ch)
    return "".join(out)


def _static(node: tree_sitter.Node) -> tuple[str, bool]:
    """The literal text of an argument and whether it is complete (no expansion).

    An incomplete value keeps the literal prefix up to the first expansion, so
    ``/etc/$x`` is still checked as a path under ``/etc``.
    """
    kind = node.type
    text = (node.text or b"").decode("utf-8", "surrogateescape")
    if kind in ("word", "number"):
        return _unescape(text), True
    if kind == "raw_string":
        return text[1:-1], True
    if kind == "string":
        parts: list[str] = []
        for child in node.children:
            if child.type == '"':
                continue
            if child.type == "string_content":
                parts.append((child.text or b"").decode("utf-8", "surrogateescape"))
            else:
                return "".join(parts), False
        return "".join(parts), True
    if kind == "concatenation":
        parts = []
        for child in node.children:
            # The grammar keeps concatenations flat; one nested in another is not read
            # (and so not recursed into), which leaves the value incomplete.
            value, complete = _static(child) if child.type != "concatenation" else ("", False)
            parts.append(value)
            if not complete:
                return "".join(parts), False
        return "".join(parts), True
    return "", False


class _OverBudget(Exception):
    """The check ran past its time budget (caught where the refusal is written)."""


@dataclass(frozen=True, slots=True)
class _Deadline:
    at: float

    @classmethod
    def after(cls, seconds: float) -> _Deadline:
        return cls(time.monotonic() + seconds)

    def check(self) -> None:
        if time.monotonic() > self.at:
            raise _OverBudget()


@dataclass
class _Walk:
    scope: Scope
    cwd: PurePosixPath | None
    deadline: _Deadline | None = None
    found: list[tuple[str, Mode]] = field(default_factory=list)
    recursive_listing: bool = False
    #: Canonical form of each path, and target of each symlink, already resolved in
    #: this command (one naming a symlink chain many times resolves it once).
    canonical: dict[str, str | None] = field(default_factory=dict)
    links: dict[str, tuple[str, ...] | None] = field(default_factory=dict)

    def canonicalize(self, virtual: str) -> str | None:
        if virtual not in self.canonical:
            self.canonical[virtual] = canonicalize(self.scope, virtual, self.deadline, self.links)
        return self.canonical[virtual]

    def add(self, value: str, complete: bool, access: Mode) -> None:
        """Record one named path (resolved against the cwd known at this point)."""
        if not complete:
            if not value.startswith(("/", "~")):
                return
            value = value[: value.rfind("/") + 1] or "/"
        cut = min((i for i in (value.find(c) for c in _GLOB_CHARS) if i >= 0), default=-1)
        if cut >= 0:
            value = value[:cut]
            value = value[: value.rfind("/") + 1] if "/" in value else ""
            if not value:
                value = "."
            access = Mode.RO if value.endswith("/") else access
        if value == "":
            return
        if value == "~" or value.startswith("~/"):
            value = str(self.scope.cwd) + value[1:]
        elif value.startswith("~"):
            value = "/home/" + value[1:]
        if not value.startswith("/"):
            if self.cwd is None:
                return
            value = str(self.cwd / value)
        self.found.append((value, access))


def _command_words(node: tree_sitter.Node) -> tuple[str | None, list[tree_sitter.Node]]:
    name: str | None = None
    args: list[tree_sitter.Node] = []
    for child in node.children:
        if child.type == "command_name":
            inner = child.children[0] if child.children else child
            text, complete = _static(inner)
            name = text if complete else None
        elif child.is_named and child.type not in (
            "variable_assignment",
            "file_redirect",
            "herestring_redirect",
        ):
            args.append(child)
    return name, args


def _next_cwd(walk: _Walk, dest: str) -> PurePosixPath | None:
    if dest == "~" or dest.startswith("~/"):
        dest = str(walk.scope.cwd) + dest[1:]
    if not dest.startswith("/"):
        if walk.cwd is None:
            return None
        dest = str(walk.cwd / dest)
    canonical = walk.canonicalize(dest)
    return None if canonical is None else PurePosixPath(canonical)


def _visit_command(node: tree_sitter.Node, walk: _Walk) -> None:
    name, args = _command_words(node)
    words = [_static(a) for a in args]
    # Unwrap `env X=1 nice -n 5 cmd ...` down to `cmd`.
    while name is not None and os.path.basename(name) in _WRAPPERS and words:
        skip = 0
        while skip < len(words) and (
            words[skip][0].startswith("-") or "=" in words[skip][0] or words[skip][0].isdigit()
        ):
            skip += 1
        if skip >= len(words):
            break
        name = words[skip][0] if words[skip][1] else None
        words = words[skip + 1 :]
    base = os.path.basename(name) if name else None
    options = [w for w, ok in words if ok and w.startswith("-")]
    if base in ("ls",) and any(o == "--recursive" or (o[:2] != "--" and "R" in o) for o in options):
        walk.recursive_listing = True
    if base in _PATTERN_FIRST and base in ("grep", "egrep", "fgrep", "rg"):
        walk.recursive_listing |= base == "rg" or any(
            o in ("--recursive", "--dereference-recursive")
            or (o[:2] != "--" and ("r" in o or "R" in o))
            for o in options
        )
    if base in _LISTING_COMMANDS:
        walk.recursive_listing = True
    in_place = base == "sed" and any(o.startswith(("-i", "--in-place")) for o in options)

    operands: list[tuple[str, bool]] = []
    end_of_options = False
    for value, complete in words:
        if complete and not end_of_options and value == "--":
            end_of_options = True
            continue
        if complete and not end_of_options and value.startswith("-") and value != "-":
            if value.startswith("--") and "=" in value:
                opt_value = value.split("=", 1)[1]
                if opt_value.startswith(("/", "~", "./", "../")):
                    walk.add(opt_value, True, Mode.RO)
            continue
        operands.append((value, complete))

    if base == "dd":
        for value, complete in operands:
            key, _, target = value.partition("=")
            if key in ("if", "of"):
                walk.add(target, complete, Mode.RW if key == "of" else Mode.RO)
        return
    if (
        base in _PATTERN_FIRST
        and operands
        and not any(
            o in ("-e", "-f") or o.startswith(("--regexp", "--file", "--expression"))
            for o in options
        )
    ):
        operands = operands[1:]
    if base in ("cd", "pushd"):
        dest, known = operands[0] if operands else ("~", True)
        walk.add(dest, known, Mode.RO)
        walk.cwd = _next_cwd(walk, dest) if known and dest != "-" else None
        return

    for index, (value, complete) in enumerate(operands):
        if base in _WRITE_ALL or in_place:
            access = Mode.RW
        elif base in _WRITE_LAST:
            access = Mode.RW if index == len(operands) - 1 else Mode.RO
        else:
            access = Mode.RO
        if base == "ln" and index < len(operands) - 1 and "-s" in "".join(options):
            continue  # a symlink's target text is not opened by ln
        named = base in _FILE_COMMANDS or access is Mode.RW
        if named or value.startswith(("/", "~")) or "../" in value or value == "..":
            walk.add(value, complete, access)


def _visit_redirect(node: tree_sitter.Node, walk: _Walk) -> None:
    operator: str | None = None
    destinations: list[tree_sitter.Node] = []
    for child in node.children:
        if child.type == "file_descriptor":
            continue
        if not child.is_named:
            operator = (child.text or b"").decode()
        else:
            destinations.append(child)
    if not destinations or operator is None:
        return
    first, *rest = destinations
    if operator in _DUP_REDIRECTS or (operator in (">&", "<&") and first.type == "number"):
        pass
    else:
        value, complete = _static(first)
        if not (first.type == "number" and operator in (">&", "<&")):
            access = Mode.RW if operator in _WRITE_REDIRECTS else Mode.RO
            walk.add(value, complete, access)
    for extra in rest:  # `cat 2>&1 file`: the grammar files `file` under the redirect
        value, complete = _static(extra)
        if value.startswith(("/", "~")) or "../" in value:
            walk.add(value, complete, Mode.RO)


def _preorder(root: tree_sitter.Node) -> Iterator[tuple[tree_sitter.Node, int]]:
    """Every node in command order with its nesting level, without recursion."""
    stack = [(root, 0)]
    while stack:
        node, level = stack.pop()
        yield node, level
        inner = level + (node.type in _NESTING_NODES)
        stack.extend((child, inner) for child in reversed(node.children))


def _nesting(root: tree_sitter.Node, deadline: _Deadline | None) -> int:
    deepest = 0
    for count, (_, level) in enumerate(_preorder(root)):
        deepest = max(deepest, level)
        if deadline is not None and not count % 1024:
            deadline.check()
    return deepest


def _walk(root: tree_sitter.Node, walk: _Walk) -> None:
    for node, _ in _preorder(root):
        if walk.deadline is not None:
            walk.deadline.check()
        if node.type == "command":
            _visit_command(node, walk)
        elif node.type == "file_redirect":
            _visit_redirect(node, walk)


# -- canonicalization ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Mounts:
    """A scope's mounts by virtual path, deepest first: string prefix tests, which
    stay cheap when one command names thousands of paths."""

    table: tuple[tuple[str, Mount], ...]

    @classmethod
    def of(cls, scope: Scope) -> _Mounts:
        ordered = sorted(scope.mounts, key=lambda m: -len(m.virtual.parts))
        return cls(tuple((str(m.virtual), m) for m in ordered))

    def at(self, path: str) -> Mount | None:
        for virtual, mount in self.table:
            if path == virtual or path.startswith(virtual + "/"):
                return mount
        return None


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _real_inside(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip("/") + "/")


def canonicalize(
    scope: Scope,
    virtual: str,
    deadline: _Deadline | None = None,
    links: dict[str, tuple[str, ...] | None] | None = None,
) -> str | None:
    """The canonical virtual path of ``virtual`` (absolute), or None when a symlink
    leads out of its mount. ``..`` is applied after symlinks, as the kernel does.

    ``links`` caches what each virtual prefix resolves to, so many paths under one
    symlink chain cost one resolution of the chain."""
    mounts = _Mounts.of(scope)
    parts: list[str] = []
    pending = [p for p in virtual.split("/") if p not in ("", ".")]
    pending.reverse()
    hops = 0
    while pending:
        if deadline is not None:
            deadline.check()
        part = pending.pop()
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
        key = "/".join(parts)
        if links is not None and key in links:
            target = links[key]
        else:
            target = _link_target(mounts, "/" + key)
            if links is not None:
                links[key] = target
        if target is None or target == tuple(parts):
            continue
        hops += 1
        if hops > 40 or target == _ESCAPES:
            return None
        parts = list(target)
    return "/" + "/".join(parts)


#: :func:`_link_target` of a symlink whose target leaves its mount.
_ESCAPES: tuple[str, ...] = ("",)


def _link_target(mounts: _Mounts, current: str) -> tuple[str, ...] | None:
    """None when ``current`` is no symlink; else the canonical virtual parts of its
    target, or :data:`_ESCAPES` when the target is outside its mount."""
    mount = mounts.at(current)
    if mount is None or current == str(mount.virtual):
        return None
    real = os.path.join(mount.real, current[len(str(mount.virtual)) + 1 :])
    if not os.path.islink(real):
        return None
    resolved = os.path.realpath(real)
    root = os.path.realpath(mount.real)
    if not _real_inside(resolved, root):
        return _ESCAPES
    rel = os.path.relpath(resolved, root)
    return (*mount.virtual.parts[1:], *(rel.split("/") if rel != "." else ()))


def classify(scope: Scope, canonical: str) -> Mode | None:
    """What a canonical virtual path allows: its mount's mode, a system root's, or
    ``None`` for a path outside everything the agent sees."""
    mount = _Mounts.of(scope).at(canonical)
    if mount is not None:
        return mount.mode
    if any(_inside(canonical, root) for root in PRIVATE_WRITABLE):
        return Mode.RW
    if any(_inside(canonical, root) for root in SYSTEM_READ_ONLY):
        return Mode.RO
    if canonical in _LISTABLE or any(
        _inside(str(m.virtual), canonical) for m in scope.mounts
    ):  # a folder above the mounts (/, /mnt, /mnt/memory ...)
        return Mode.RO
    return None


def check_path(scope: Scope, path: str, access: Mode, walk: _Walk | None = None) -> str | None:
    """The rejection for one absolute virtual path, or None when it is allowed."""
    display = posixpath.normpath(path)
    if display.startswith("//"):
        display = "/" + display.lstrip("/")
    canonical = canonicalize(scope, path) if walk is None else walk.canonicalize(path)
    if canonical is None:
        return f"{OUTSIDE}: {display}"
    verdict = classify(scope, canonical)
    if verdict is None:
        return f"{OUTSIDE}: {display}"
    if access is Mode.RW and verdict is Mode.RO:
        return f"{READ_ONLY}: {display}"
    return None


def check_command(
    scope: Scope, command: str, *, budget: float = CHECK_BUDGET_SECONDS
) -> CheckResult:
    """Parse ``command`` and check every path it names against ``scope``.

    The first offending path (in command order) is the one reported. Bounded: see
    the module docstring; ``budget`` is the time it may take, in seconds.
    """
    if "\x00" in command:
        return CheckResult(f"{UNPARSEABLE}: it contains a NUL byte")
    try:
        # Strict: a lone surrogate would be quoted back in a refusal that no JSON
        # payload can carry.
        data = command.encode("utf-8")
    except UnicodeEncodeError:
        return CheckResult(f"{UNPARSEABLE}: it is not valid text (an unpaired surrogate)")
    if len(data) > MAX_COMMAND_BYTES:
        return CheckResult(
            f"{TOO_LONG}: {len(data)} bytes, the limit is {MAX_COMMAND_BYTES}; split it "
            "into smaller commands (for a long script, append it to a file under "
            "/mnt/scratch/own in parts, then run that file with bash)"
        )
    deadline = _Deadline.after(budget)
    walk = _Walk(scope=scope, cwd=scope.cwd, deadline=deadline)
    try:
        tree = _parser().parse(data)
        if tree.root_node.has_error:
            return CheckResult(
                f"{UNPARSEABLE}: bash syntax error (check quotes, brackets and heredoc ends)"
            )
        depth = _nesting(tree.root_node, deadline)
        if depth > MAX_NESTING:
            return CheckResult(
                f"{TOO_DEEP}: {depth} levels of $(...), (...), {{...}}, blocks or "
                f"expansions inside one another, the limit is {MAX_NESTING}; flatten it "
                "(assign inner results to variables first)"
            )
        _walk(tree.root_node, walk)
        for path, access in walk.found:
            rejection = check_path(scope, path, access, walk)
            if rejection is not None:
                return CheckResult(rejection, tuple(walk.found), walk.recursive_listing)
    except _OverBudget:
        return CheckResult(
            f"{TOO_COSTLY}: checking it took over {budget:g}s ({len(walk.found)} paths "
            f"named, {len(walk.canonical)} resolved); split it into smaller commands "
            "or name fewer paths through symlinks"
        )
    return CheckResult(None, tuple(walk.found), walk.recursive_listing)


# -- listing filter --------------------------------------------------------------------


def _listed_path(line: str) -> str | None:
    """The path one output line of find/ls -R/grep -r/tree/du names, if any:
    ``path:`` headers and ``path:match`` lines name their head, ``du`` its last field."""
    stripped = line.strip()
    if not stripped:
        return None
    if "\t" in stripped:
        stripped = stripped.split("\t")[-1]
    head = stripped.split(":", 1)[0]
    if head.startswith(("/", "./", "../")):
        return head
    return None


#: The line that ends a listing whose filter ran out of time (the rest is dropped).
LISTING_CUT = "lw.bash: listing cut here: filtering it took too long; list less at once\n"


def filter_listing(
    scope: Scope,
    text: str,
    cwd: PurePosixPath | None = None,
    *,
    budget: float = CHECK_BUDGET_SECONDS,
) -> str:
    """Drop output lines that name a path outside the roots (the seeds' find rule).

    Past ``budget`` seconds the remaining lines are dropped, not shown unfiltered."""
    base = cwd or scope.cwd
    walk = _Walk(scope=scope, cwd=base, deadline=_Deadline.after(budget))
    kept: list[str] = []
    try:
        for line in text.splitlines(keepends=True):
            candidate = _listed_path(line)
            if candidate is not None:
                absolute = candidate if candidate.startswith("/") else str(base / candidate)
                canonical = walk.canonicalize(absolute)
                if canonical is None or classify(scope, canonical) is None:
                    continue
            kept.append(line)
    except _OverBudget:
        kept.append(LISTING_CUT)
    return "".join(kept)
