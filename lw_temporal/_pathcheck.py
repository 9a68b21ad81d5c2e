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
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from pathlib import PurePosixPath

import tree_sitter
import tree_sitter_bash

from ._scope import Scope

OUTSIDE = "path is outside the allowed roots"
READ_ONLY = "path is read-only"
UNPARSEABLE = "command could not be parsed"

#: Read-only system roots the sandbox shows (see the module docstring).
SYSTEM_READ_ONLY: tuple[str, ...] = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib64",
    "/etc/ld.so.cache",
    "/etc/alternatives",
    "/proc",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/stdin",
    "/dev/pts",
    "/dev/ptmx",
)
#: Folders that may be listed but hold nothing of their own to allow beyond the above.
_LISTABLE = ("/", "/dev", "/etc")
#: Writable places private to one command (discarded when it ends).
PRIVATE_WRITABLE: tuple[str, ...] = (
    "/tmp",
    "/dev/null",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/fd",
    "/dev/shm",
    "/proc/self/fd",
)

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


class Access(Enum):
    READ = "read"
    WRITE = "write"


class Verdict(Enum):
    OUTSIDE = "outside"
    READ_ONLY = "ro"
    WRITABLE = "rw"


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The pre-check's answer: ``rejection`` is the message for the agent, or None."""

    rejection: str | None
    paths: tuple[tuple[str, Access], ...] = ()
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
            value, complete = _static(child)
            parts.append(value)
            if not complete:
                return "".join(parts), False
        return "".join(parts), True
    return "", False


@dataclass
class _Walk:
    scope: Scope
    cwd: PurePosixPath | None
    found: list[tuple[str, Access]] = field(default_factory=list)
    recursive_listing: bool = False

    def add(self, value: str, complete: bool, access: Access) -> None:
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
            access = Access.READ if value.endswith("/") else access
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
    canonical = canonicalize(walk.scope, dest)
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
                    walk.add(opt_value, True, Access.READ)
            continue
        operands.append((value, complete))

    if base == "dd":
        for value, complete in operands:
            key, _, target = value.partition("=")
            if key in ("if", "of"):
                walk.add(target, complete, Access.WRITE if key == "of" else Access.READ)
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
        walk.add(dest, known, Access.READ)
        walk.cwd = _next_cwd(walk, dest) if known and dest != "-" else None
        return

    for index, (value, complete) in enumerate(operands):
        if base in _WRITE_ALL or in_place:
            access = Access.WRITE
        elif base in _WRITE_LAST:
            access = Access.WRITE if index == len(operands) - 1 else Access.READ
        else:
            access = Access.READ
        if base == "ln" and index < len(operands) - 1 and "-s" in "".join(options):
            continue  # a symlink's target text is not opened by ln
        named = base in _FILE_COMMANDS or access is Access.WRITE
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
            access = Access.WRITE if operator in _WRITE_REDIRECTS else Access.READ
            walk.add(value, complete, access)
    for extra in rest:  # `cat 2>&1 file`: the grammar files `file` under the redirect
        value, complete = _static(extra)
        if value.startswith(("/", "~")) or "../" in value:
            walk.add(value, complete, Access.READ)


def _walk(node: tree_sitter.Node, walk: _Walk) -> None:
    if node.type == "command":
        _visit_command(node, walk)
    elif node.type == "file_redirect":
        _visit_redirect(node, walk)
    for child in node.children:
        _walk(child, walk)


# -- canonicalization ------------------------------------------------------------------


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _real_inside(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip("/") + "/")


def canonicalize(scope: Scope, virtual: str) -> str | None:
    """The canonical virtual path of ``virtual`` (absolute), or None when a symlink
    leads out of its mount. ``..`` is applied after symlinks, as the kernel does."""
    parts: list[str] = []
    pending = [p for p in virtual.split("/") if p not in ("", ".")]
    pending.reverse()
    hops = 0
    while pending:
        part = pending.pop()
        if part == "..":
            if parts:
                parts.pop()
            continue
        if part == ".":
            continue
        parts.append(part)
        current = PurePosixPath("/" + "/".join(parts))
        mount = scope.mount_at(current)
        if mount is None or current == mount.virtual:
            continue
        real = mount.real.joinpath(*current.relative_to(mount.virtual).parts)
        if not os.path.islink(real):
            continue
        hops += 1
        if hops > 40:
            return None
        resolved = os.path.realpath(real)
        root = os.path.realpath(mount.real)
        if not _real_inside(resolved, root):
            return None
        rel = os.path.relpath(resolved, root)
        parts = [p for p in mount.virtual.parts[1:]]
        if rel != ".":
            parts += rel.split("/")
    return "/" + "/".join(parts)


def classify(scope: Scope, canonical: str) -> Verdict:
    """Where a canonical virtual path falls: a mount, a system root, or nowhere."""
    mount = scope.mount_at(canonical)
    if mount is not None:
        return Verdict.WRITABLE if mount.writable else Verdict.READ_ONLY
    if any(_inside(canonical, root) for root in PRIVATE_WRITABLE):
        return Verdict.WRITABLE
    if any(_inside(canonical, root) for root in SYSTEM_READ_ONLY):
        return Verdict.READ_ONLY
    if canonical in _LISTABLE or any(
        _inside(str(m.virtual), canonical) for m in scope.mounts
    ):  # a folder above the mounts (/, /mnt, /mnt/memory ...)
        return Verdict.READ_ONLY
    return Verdict.OUTSIDE


def check_path(scope: Scope, path: str, access: Access) -> str | None:
    """The rejection for one absolute virtual path, or None when it is allowed."""
    display = posixpath.normpath(path)
    if display.startswith("//"):
        display = "/" + display.lstrip("/")
    canonical = canonicalize(scope, path)
    if canonical is None:
        return f"{OUTSIDE}: {display}"
    verdict = classify(scope, canonical)
    if verdict is Verdict.OUTSIDE:
        return f"{OUTSIDE}: {display}"
    if access is Access.WRITE and verdict is Verdict.READ_ONLY:
        return f"{READ_ONLY}: {display}"
    return None


def check_command(scope: Scope, command: str) -> CheckResult:
    """Parse ``command`` and check every path it names against ``scope``.

    The first offending path (in command order) is the one reported.
    """
    if "\x00" in command:
        return CheckResult(f"{UNPARSEABLE}: it contains a NUL byte")
    tree = _parser().parse(command.encode("utf-8", "surrogateescape"))
    if tree.root_node.has_error:
        return CheckResult(
            f"{UNPARSEABLE}: bash syntax error (check quotes, brackets and heredoc ends)"
        )
    walk = _Walk(scope=scope, cwd=scope.cwd)
    _walk(tree.root_node, walk)
    for path, access in walk.found:
        rejection = check_path(scope, path, access)
        if rejection is not None:
            return CheckResult(rejection, tuple(walk.found), walk.recursive_listing)
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


def filter_listing(scope: Scope, text: str, cwd: PurePosixPath | None = None) -> str:
    """Drop output lines that name a path outside the roots (the seeds' find rule)."""
    base = cwd or scope.cwd
    kept: list[str] = []
    for line in text.splitlines(keepends=True):
        candidate = _listed_path(line)
        if candidate is not None:
            absolute = candidate if candidate.startswith("/") else str(base / candidate)
            canonical = canonicalize(scope, absolute)
            if canonical is None or classify(scope, canonical) is Verdict.OUTSIDE:
                continue
        kept.append(line)
    return "".join(kept)


# -- path rewriting (backends without a mount view) ------------------------------------


def rewrite_paths(command: str, mapping: list[tuple[str, str]]) -> str:
    """``command`` with each literal word that starts with a virtual prefix of
    ``mapping`` (longest first) moved to its replacement. Only words the parser sees
    as literal are touched; paths built at run time are not, and then do not resolve."""
    data = command.encode("utf-8", "surrogateescape")
    tree = _parser().parse(data)
    pairs = [(v.encode(), r.encode("utf-8", "surrogateescape")) for v, r in mapping]
    edits: list[tuple[int, int, bytes]] = []

    def visit(node: tree_sitter.Node) -> None:
        if node.type in ("heredoc_body", "comment"):
            return
        if node.type in ("word", "string_content", "raw_string"):
            offset = 1 if node.type == "raw_string" else 0
            body = (node.text or b"")[offset:]
            for virtual, real in pairs:
                if body == virtual or body.startswith(virtual + b"/"):
                    start = node.start_byte + offset
                    edits.append((start, start + len(virtual), real))
                    break
            return
        for child in node.children:
            visit(child)

    visit(tree.root_node)
    for start, end, real in sorted(edits, reverse=True):
        data = data[:start] + real + data[end:]
    return data.decode("utf-8", "surrogateescape")
