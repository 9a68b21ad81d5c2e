"""Layer 1 of scoped bash: the seeds' "Bash Path Enforcement", before anything runs.

The command is parsed with tree-sitter-bash (a real grammar, so quoting, heredocs,
redirections and substitutions are seen the way bash sees them). Every path the
command *names* is canonicalized against the working folder it is named in (``..``
resolved, symlinks resolved on the real side of their mount) and checked against the
scope. The answer is a refusal in the seeds' words, given to the agent as a normal
result so it can correct itself.

This layer gives helpful messages; it is not the boundary: a path built at run time
(``$(...)``, ``eval``, an interpreter) is invisible here, and the kernel sandbox
(layer 2) is what holds against it. So it refuses only what it must: a word is taken
for a path when it could reach something (its first component is a top-level entry
of the host or of the sandbox's view, or it climbs out of the roots with ``..``), with
bash's own quoting and tilde rules (:mod:`._words`); and a line the grammar cannot
read is refused only when bash itself rejects it (:mod:`._arbiter`).

Any command must get an answer, so the check is bounded: a command longer than
:data:`MAX_COMMAND_BYTES`, nested deeper than :data:`MAX_NESTING`, or costing more
than a time budget to check is refused with the limit and the fix. The caller runs
the check in a thread so that a slow one never stalls the event loop.

System paths the sandbox shows are part of the allowed roots, read-only: ``/usr``
(and the ``/bin``, ``/sbin``, ``/lib``, ``/lib64`` links into it), the ``/etc``
entries of the system view (see :class:`~lw_temporal._sandbox.SystemView`), ``/proc``
and the harmless ``/dev`` nodes. Writable but private to the command: ``/tmp``,
``/dev/shm``, ``/dev/null``, ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/*``. The
folders above the mounts (``/``, ``/mnt``, ``/mnt/memory``...) are readable so that
``ls /mnt`` and ``find /mnt`` work.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from functools import cache
from pathlib import PurePosixPath

import tree_sitter
import tree_sitter_bash

from .._mode import Mode
from .._scope import Scope
from ._arbiter import bash_accepts
from ._canon import (
    NO_STAGED_MEMORY,
    OUTSIDE,
    PRIVATE_WRITABLE,
    READ_ONLY,
    SYSTEM_READ_ONLY,
    Deadline,
    OverBudget,
    canonicalize,
    check_path,
    classify,
    verdict,
)
from ._listing import LISTING_CUT, Listing, withhold_outside
from ._walk import Walk, walk_tree

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


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The pre-check's answer: ``rejection`` is the message for the agent, or None."""

    rejection: str | None
    paths: tuple[tuple[str, Mode], ...] = ()
    lists_recursively: bool = False
    #: The working folder every recursive listing of the command ran in, when that
    #: one folder is known (None: unknown, or listings in several folders).
    listing_cwd: PurePosixPath | None = None
    #: Set (with no rejection) when the check needs what it was told not to use here
    #: (``bash -n``, outside the event loop): check again with ``arbiter=True``.
    deferred: bool = False
    #: The command sends a job to the background (``&``) and never runs ``wait``: what
    #: is still running when its shell exits is stopped then, and the result says so.
    background: bool = False


@cache
def _parser() -> tree_sitter.Parser:
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def check_command(
    scope: Scope,
    command: str,
    *,
    budget: float = CHECK_BUDGET_SECONDS,
    arbiter: bool = True,
    staged_memory: bool = True,
) -> CheckResult:
    """Parse ``command`` and check every path it names against ``scope``.

    The first offending path (in command order) is the one reported. Bounded: see
    the module docstring; ``budget`` is the time it may take, in seconds. Without
    ``arbiter`` a line the grammar cannot read is not judged (``deferred``); without
    ``staged_memory`` (a backend with no overlay) writes to memory are refused, saying
    why.
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
    deadline = Deadline(budget)
    walk = Walk.start(scope, deadline)
    try:
        tree = _parser().parse(data)
        if tree.root_node.has_error:
            if not arbiter:
                return CheckResult(None, deferred=True)
            if not bash_accepts(data, deadline.left()):
                return CheckResult(
                    f"{UNPARSEABLE}: bash syntax error (check quotes, brackets and heredoc ends)"
                )
        depth = walk_tree(tree.root_node, walk)
        if depth > MAX_NESTING:
            return CheckResult(
                f"{TOO_DEEP}: {depth} levels of $(...), (...), {{...}}, blocks or "
                f"expansions inside one another, the limit is {MAX_NESTING}; flatten it "
                "(assign inner results to variables first)"
            )
        found = tuple(walk.found)
        folders = walk.listing_folders
        listing_cwd = next(iter(folders)) if len(folders) == 1 else None
        for path, access in found:
            rejection = verdict(
                scope, path, access, walk.canonicalize(path), staged_memory=staged_memory
            )
            if rejection is not None:
                return CheckResult(rejection, found, walk.recursive_listing, listing_cwd)
    except OverBudget:
        return CheckResult(
            f"{TOO_COSTLY}: checking it took over {budget:g}s ({len(walk.found)} paths "
            f"named, {len(walk.canonical)} resolved); split it into smaller commands "
            "or name fewer paths through symlinks"
        )
    background = walk.backgrounds and not walk.waits
    return CheckResult(None, found, walk.recursive_listing, listing_cwd, background=background)


#: A command this short is first checked on the event loop with a budget short
#: enough not to delay anything else there (most commands: checking costs far less
#: than waking a thread); one that needs longer, or ``bash -n``, is checked again in
#: a thread.
INLINE_CHECK_BYTES = 1024
INLINE_CHECK_SECONDS = 0.002


async def precheck(scope: Scope, command: str, *, staged_memory: bool = True) -> CheckResult:
    """The pre-check as ``lw.bash`` runs it: off the event loop unless it is short (a
    costly command must not stall the worker's event loop and its heartbeats) and
    fail-closed: a command it cannot finish reading is refused like any other, never
    an activity failure that would be retried."""
    if len(command) <= INLINE_CHECK_BYTES:
        with contextlib.suppress(Exception):  # any trouble: the thread's check answers
            check = check_command(
                scope,
                command,
                budget=INLINE_CHECK_SECONDS,
                arbiter=False,
                staged_memory=staged_memory,
            )
            if not check.deferred and not (check.rejection or "").startswith(TOO_COSTLY):
                return check
    try:
        return await asyncio.to_thread(
            lambda: check_command(scope, command, staged_memory=staged_memory)
        )
    except Exception as err:  # any input must get an answer
        return CheckResult(
            f"{UNPARSEABLE}: the pre-check could not read it ({type(err).__name__}); "
            "simplify the command"
        )


def filter_listing(
    scope: Scope,
    text: str,
    cwd: PurePosixPath | None = None,
    *,
    budget: float = CHECK_BUDGET_SECONDS,
) -> str:
    """``text`` without the lines naming a path outside the roots, relative lines
    judged against ``cwd`` (default: the agent's working folder); see
    :func:`withhold_outside` for the count of what was left out."""
    return withhold_outside(scope, text, cwd or scope.cwd, budget=budget).text


__all__ = [
    "CHECK_BUDGET_SECONDS",
    "LISTING_CUT",
    "MAX_COMMAND_BYTES",
    "MAX_NESTING",
    "NO_STAGED_MEMORY",
    "OUTSIDE",
    "PRIVATE_WRITABLE",
    "READ_ONLY",
    "SYSTEM_READ_ONLY",
    "TOO_COSTLY",
    "TOO_DEEP",
    "TOO_LONG",
    "UNPARSEABLE",
    "CheckResult",
    "Listing",
    "canonicalize",
    "check_command",
    "check_path",
    "classify",
    "filter_listing",
    "precheck",
    "withhold_outside",
]
