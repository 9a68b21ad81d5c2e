"""The pieces of one ``lw.bash`` command that are not its order of steps: heartbeats
while it waits, the account it runs as, the empty folders of its view, references to
its spilled output, and the hint for a failure."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import functools
import os
import re
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import TypeVar

from temporalio import activity

# The request and result models live beside this module; importers keep finding them here.
from ._bash_models import BashRequest as BashRequest
from ._bash_models import BashResult as BashResult
from ._bash_models import MemoryChange as MemoryChange
from ._pathcheck import NO_STAGED_MEMORY
from ._sandbox import (
    Account,
    Backend,
    OutputSink,
    SandboxSpec,
    forget_staging,
    remove_tree,
    shown_name,
)
from ._scope import Mount, Scope

_T = TypeVar("_T")

#: Said after a command that sent a job to the background without waiting for it.
BACKGROUND_NOTE = (
    "the command sent a job to the background (&) and did not wait for it: whatever "
    "of it was still running when the shell exited was stopped then, and what it would "
    "have printed later is lost (add `wait`, or run it in the foreground)"
)


def decode_output(data: bytes, *, cut: bool = False) -> str:
    """UTF-8 with undecodable bytes shown as ``\\xNN``: visible, JSON-safe, and the raw
    bytes stay in the saved file. ``cut``: ``data`` is the head of a longer stream, so
    a character the cap cut in two is left out (whole in the saved file) rather than
    shown as bytes the command never printed alone."""
    if cut:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="backslashreplace")
        return decoder.decode(data, final=False)
    return data.decode("utf-8", errors="backslashreplace")


def _refusal(mount: Mount, path: str, reason: str) -> str:
    where = str(mount.virtual) if path == "." else f"{mount.virtual}/{shown_name(path)}"
    return f"{where}: {reason}"


def _discard(folder: Path) -> None:
    """Remove a used staging folder set, whatever depth or names a command left."""
    forget_staging(folder)
    try:
        remove_tree(folder)
    except OSError as err:
        activity.logger.warning("lw.bash: staging folder %s not removed: %s", folder, err)


async def _beating(
    heartbeat: Callable[[], None] | None,
    fn: Callable[..., _T],
    *args: object,
    every: float = 2.0,
) -> _T:
    """``fn(*args)`` in a thread, heartbeating meanwhile: a commit of many or large
    files under the store lock can outlast the heartbeat timeout."""
    task = asyncio.ensure_future(asyncio.to_thread(fn, *args))
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=every)
            if done:
                return task.result()
            if heartbeat is not None:
                heartbeat()
    except asyncio.CancelledError:
        # A thread cannot be stopped: let it finish before the caller removes the
        # staging folder it reads (a commit is all or nothing either way).
        while not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({task})
        raise


#: A program's words for a host name that does not resolve, or no route at all
#: (curl, wget, git, ssh, pip, npm, Python's urllib).
_OFFLINE = re.compile(
    r"[Cc]ould not resolve host|Temporary failure in name resolution|Name or service not "
    r"known|No address associated with hostname|unable to resolve host address|"
    r"getaddrinfo (?:EAI_AGAIN|ENOTFOUND)|Network is unreachable"
)
NO_NETWORK_HINT = (
    "this agent has no network: its definition has no NetworkPolicy, so no host name "
    "resolves and nothing outside the sandbox is reachable (retrying will not help); "
    "work offline (a wheel, a clone or a mirror in the agent's folders), or give the "
    "definition a NetworkPolicy that allows the hosts it needs"
)


def _hint(scope: Scope, backend: Backend, spec: SandboxSpec, raw_err: str) -> str | None:
    """Why a failed command may have worked elsewhere: a gap of the backend, a write
    to a memory mount that only an overlay (a mount view) can stage, or a network its
    agent does not have."""
    hint = backend.explain(spec, raw_err)
    # What the spec mounted there: a store that does not exist yet is an empty folder.
    writable = {m.virtual for m in scope.mounts if m.store and m.writable}
    memory = [str(m.source) for m in spec.mounts if m.target in writable]
    if hint is None and not backend.has_mount_view and "denied" in raw_err:
        hint = NO_STAGED_MEMORY if any(real in raw_err for real in memory) else None
    if scope.network is None and _OFFLINE.search(raw_err):
        hint = f"{hint}; {NO_NETWORK_HINT}" if hint else NO_NETWORK_HINT
    return hint


@functools.lru_cache(maxsize=256)
def _account_of(definition_id: str, role: str, author: str | None) -> Account:
    return Account(git_author=author or f"{definition_id} {role} <{role}@{definition_id}.invalid>")


def _account(scope: Scope) -> Account:
    """The command's account: its git author is the definition's, or one naming the
    definition and role (``cr worker <worker@cr.invalid>``)."""
    definition = scope.definition
    name = definition.id if definition is not None else "pipeline"
    author = definition.git_author if definition is not None else None
    return _account_of(name, scope.role.value, author)


def _ref(sink: OutputSink, scope: Scope, own_virtual: PurePosixPath) -> str | None:
    if not sink.spilled:
        return None
    rel = sink.path.relative_to(scope.own_scratch)
    return str(own_virtual.joinpath(*rel.parts))


def _saved_note(name: str, sink: OutputSink, ref: str | None) -> str | None:
    """What a saved stream's file lacks, else None: it could not be made or written, it
    is gone (removed with what the command wrote past its scratch quota, or by a
    command of the agent), or the stream outgrew the saved cap too."""
    if sink.unsaved is not None:
        where = f"only its first {sink.saved} are saved in {ref}" if ref else "it is not saved"
        return f"{name} was {sink.total} bytes: {where} ({sink.path.name}: {sink.unsaved})"
    if ref is None:
        return None
    if not os.path.lexists(sink.path):
        return (
            f"{name} is not saved: {ref} is gone (past the scratch quota the largest files "
            "a command wrote are removed; older outputs are in "
            f"/mnt/scratch/own/{sink.path.parent.name}): free room or write a large output "
            "to a file"
        )
    if sink.saved < sink.total:
        return (
            f"{name} was {sink.total} bytes: only its first {sink.saved} are saved in {ref} "
            "(BashActivities saved_output_cap); write a large output to a file instead"
        )
    return None


def _empty_dir(scope: Scope, virtual: PurePosixPath) -> Path:
    """The empty, read-only folder shown at ``virtual`` while what it mounts does not
    exist yet: one per mount, so that a path a backend without a mount view reports
    under its real name (Landlock) is named back as the mount it was shown for (one
    folder for all named every missing mount after whichever sorted first)."""
    path = _empty_path(scope.layout.local_state, str(virtual))
    if not os.path.isdir(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(path.parent, 0o711)  # passable by the agents, not listable
        path.mkdir(exist_ok=True)
        os.chmod(path, 0o555)
    return path


@functools.lru_cache(maxsize=256)
def _empty_path(local_state: Path, virtual: str) -> Path:
    # '%' is in no mount's name (IDs and definition ids exclude it): one flat folder each
    return local_state / "sandbox" / "empty-mounts" / virtual.strip("/").replace("/", "%")


def _heartbeat(
    stdout_bytes: int, stderr_bytes: int, tails: tuple[bytes, bytes] = (b"", b"")
) -> None:
    details: dict[str, object] = {"stdout_bytes": stdout_bytes, "stderr_bytes": stderr_bytes}
    # The newest output, for the live view (``lw-temporal run``/``status``): heartbeat
    # details are shown by describe() and enter the history only as a timed-out
    # attempt's last details, sealed like every payload.
    for name, tail in zip(("stdout_tail", "stderr_tail"), tails, strict=True):
        if tail:
            details[name] = tail.decode("utf-8", "replace")
    activity.heartbeat(details)


def _with_tails(
    heartbeat: Callable[..., None], stdout: OutputSink, stderr: OutputSink
) -> Callable[[int, int], None]:
    """The command's heartbeat, carrying the newest output of both streams when the
    activity's own heartbeat takes it."""
    if heartbeat is not _heartbeat:
        return heartbeat
    return lambda out, err: _heartbeat(out, err, (stdout.tail, stderr.tail))
