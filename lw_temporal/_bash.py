"""``lw.bash``: the agents' shell, scoped by their workflow ID and held by the kernel.

Data flows one way: ``activity.info()`` -> :class:`Scope` -> sandbox mounts -> a
process. The request carries a command and a timeout only; nothing in it can add a
mount or make one writable.

One command reads as check -> spec -> run -> commit, with two layers of enforcement.
The pre-check (:mod:`._pathcheck`) refuses, in the seeds' words, a command that names a
path outside the roots or writes a read-only one; the refusal is a normal result
(``exit_code`` :data:`REJECTED_EXIT_CODE`, ``rejection`` set) so the agent can read it
and correct itself. The sandbox (:mod:`._sandbox`) then makes the mount table true for
whatever the command does at run time.

Writable memory mounts are never bound read-write: the command writes into an overlay
whose upper folder is read afterwards (cost follows what changed, not the store's
size) and the changes are committed through ``commit_staged`` (the memory store's
audited path when the plugin wires it in; a plain atomic apply otherwise). A command
that times out or is cancelled commits nothing to memory.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from temporalio import activity

from ._config import LwConfig
from ._errors import SANDBOX_FAILED, SANDBOX_UNAVAILABLE, lw_error
from ._pathcheck import UNPARSEABLE, CheckResult, check_command, filter_listing
from ._sandbox import (
    LAUNCH_FAILED_MARKER,
    LAUNCH_FAILED_STATUS,
    Backend,
    Limits,
    MountMode,
    OutputSink,
    SandboxMount,
    SandboxSpec,
    SandboxUnavailable,
    UpperChange,
    apply_changes,
    collect_changes,
    run_sandboxed,
    select_backend,
)
from ._scope import Mount, Scope, StoreRef

BASH_ACTIVITY = "lw.bash"
#: ``exit_code`` of a command the pre-check refused (bash's "cannot execute").
REJECTED_EXIT_CODE = 126
#: ``exit_code`` of a command killed by its timeout (as coreutils ``timeout``).
TIMEOUT_EXIT_CODE = 124
#: Folder (inside the own scratch) holding full outputs that did not fit the result.
OUTPUT_FOLDER = ".bash-output"


class BashRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    #: No length bound here: a request that failed to decode would be retried; the
    #: pre-check refuses one over ``MAX_COMMAND_BYTES`` with a readable reason instead.
    command: str
    timeout_seconds: float | None = Field(default=None, gt=0)


class MemoryChange(BaseModel):
    model_config = ConfigDict(frozen=True)

    #: The virtual path the agent used, e.g. ``/mnt/memory/workflow/lessons.md``.
    path: str
    kind: Literal["write", "delete", "mkdir"]
    store: str


class BashResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    exit_code: int
    stdout: str
    stderr: str
    rejection: str | None = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    #: Virtual paths (under /mnt/scratch/own/) of the full outputs, set when truncated.
    stdout_ref: str | None = None
    stderr_ref: str | None = None
    duration_seconds: float = 0.0
    timed_out: bool = False
    memory_changes: tuple[MemoryChange, ...] = ()
    #: Memory changes that were not kept, each ``<virtual path>: <reason>``.
    memory_refused: tuple[str, ...] = ()
    sandbox: str = ""


@dataclass(frozen=True, slots=True)
class CommitOutcome:
    applied: Sequence[UpperChange]
    refused: Sequence[tuple[str, str]]


#: Commits one command's changes to one store: (scope, store, changes) -> outcome.
CommitStaged = Callable[[Scope, StoreRef, Sequence[UpperChange]], CommitOutcome]


def apply_staged(scope: Scope, store: StoreRef, changes: Sequence[UpperChange]) -> CommitOutcome:
    """The plain commit: apply the changes to the store folder under a per-store lock."""
    root = store.path(scope.layout)
    locks = scope.layout.state / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{store.kind.value}-{store.key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        root.mkdir(parents=True, exist_ok=True)
        apply_changes(root, list(changes))
    return CommitOutcome(applied=list(changes), refused=[])


def decode_output(data: bytes) -> str:
    """UTF-8 with undecodable bytes shown as ``\\xNN``: visible, JSON-safe, and the raw
    bytes stay in the saved file."""
    return data.decode("utf-8", errors="backslashreplace")


class BashActivities:
    """Holds the worker-side settings of ``lw.bash``.

    Args:
        config: data dir and definitions.
        sandbox: ``"auto"`` or ``"bwrap"`` for the kernel sandbox, or
            ``"unsandboxed-dangerous"`` to run commands with no isolation at all.
        output_cap: bytes of each stream returned in the result.
        saved_output_cap: bytes of each stream saved to the own scratch when longer.
        default_timeout: seconds a command may run when the request names none.
        max_timeout: the most a request may ask for.
        limits: rlimits, tmpfs size and process limit of each command.
        commit_staged: how bash-made memory changes are committed.
    """

    def __init__(
        self,
        config: LwConfig,
        *,
        sandbox: str = "auto",
        output_cap: int = 64 * 1024,
        saved_output_cap: int = 64 * 1024 * 1024,
        default_timeout: float = 120.0,
        max_timeout: float = 3600.0,
        limits: Limits | None = None,
        commit_staged: CommitStaged | None = None,
    ) -> None:
        self.config = config
        self.sandbox = sandbox
        self.output_cap = output_cap
        self.saved_output_cap = saved_output_cap
        self.default_timeout = default_timeout
        self.max_timeout = max_timeout
        self.limits = limits or Limits()
        self.commit_staged: CommitStaged = commit_staged or apply_staged
        self._backend: Backend | None = None
        self._scopes: dict[tuple[str, str], Scope] = {}
        # Staging folders (upper/work/merged) whose command wrote nothing are reused:
        # creating and removing three folders per command costs about as much as the
        # overlay mount itself.
        self._idle_staging: list[Path] = []

    @property
    def callables(self) -> list[Callable[..., object]]:
        return [self.bash]

    def backend(self) -> Backend:
        if self._backend is None:
            try:
                self._backend = select_backend(self.sandbox)
            except SandboxUnavailable as err:
                raise lw_error(SANDBOX_UNAVAILABLE, f"lw.bash cannot run here: {err}") from None
        return self._backend

    def _scope(self) -> Scope:
        """The calling activity's scope (derived from ``activity.info()`` only), kept
        per workflow: the configuration is fixed, so the derivation is pure."""
        info = activity.info()
        key = (info.workflow_id or "", info.workflow_type or "")
        scope = self._scopes.get(key)
        if scope is None:
            scope = self.config.activity_scope()
            if len(self._scopes) >= 1024:
                self._scopes.clear()
            self._scopes[key] = scope
        return scope

    @activity.defn(name=BASH_ACTIVITY)
    async def bash(self, request: BashRequest) -> BashResult:
        scope = self._scope()
        info = activity.info()
        safe_id = "".join(c if c.isalnum() or c in "._-" else "_" for c in info.activity_id)
        tag = f"{safe_id[:64]}-{info.attempt}-{uuid.uuid4().hex[:6]}"
        return await self.run(scope, request, tag=tag, heartbeat=_heartbeat)

    async def run(
        self,
        scope: Scope,
        request: BashRequest,
        *,
        tag: str,
        heartbeat: Callable[[int, int], None] | None = None,
    ) -> BashResult:
        """Check and run one command in ``scope`` (the activity body, callable directly
        by code that already holds a trusted scope, such as benchmarks)."""
        check = await _precheck(scope, request.command)
        if check.rejection is not None:
            return BashResult(
                exit_code=REJECTED_EXIT_CODE,
                stdout="",
                stderr=check.rejection + "\n",
                rejection=check.rejection,
                sandbox=self.sandbox,
            )
        backend = self.backend()
        timeout = min(request.timeout_seconds or self.default_timeout, self.max_timeout)
        staged: list[tuple[Mount, Path]] = []
        spec: SandboxSpec | None = None
        try:
            spec = self._spec(scope, backend, request.command, timeout, staged)
            out_dir = scope.own_scratch / OUTPUT_FOLDER
            stdout = OutputSink(self.output_cap, self.saved_output_cap, out_dir / f"{tag}.stdout")
            stderr = OutputSink(self.output_cap, self.saved_output_cap, out_dir / f"{tag}.stderr")
            try:
                outcome = await run_sandboxed(backend, spec, stdout, stderr, heartbeat=heartbeat)
            except SandboxUnavailable as err:
                raise lw_error(
                    SANDBOX_UNAVAILABLE, f"workflow {scope.workflow_id}: lw.bash cannot run: {err}"
                ) from None
            head_err = bytes(stderr.head)
            if outcome.exit_code == LAUNCH_FAILED_STATUS and LAUNCH_FAILED_MARKER.encode() in (
                head_err
            ):
                raise lw_error(
                    SANDBOX_FAILED,
                    f"workflow {scope.workflow_id}: the sandbox could not be set up: "
                    f"{decode_output(head_err).strip()}",
                )
            changes: list[MemoryChange] = []
            refused: list[str] = []
            if staged and outcome.timed_out:
                refused.append("memory changes discarded: the command timed out")
            elif any(_changed(folder) for _, folder in staged):
                changes, refused = await asyncio.to_thread(self._commit, scope, staged)
        finally:
            await self._release(staged, spec.private_dir if spec is not None else None)
        text_out = backend.present(spec, decode_output(bytes(stdout.head)))
        head_text = backend.present(spec, decode_output(head_err))
        if check.lists_recursively:
            text_out = await asyncio.to_thread(filter_listing, scope, text_out)
        own_virtual = PurePosixPath(scope.cwd)
        return BashResult(
            exit_code=TIMEOUT_EXIT_CODE if outcome.timed_out else outcome.exit_code,
            stdout=text_out,
            stderr=head_text
            + (f"lw.bash: command timed out after {timeout:g}s\n" if outcome.timed_out else ""),
            stdout_truncated=stdout.truncated,
            stderr_truncated=stderr.truncated,
            stdout_bytes=stdout.total,
            stderr_bytes=stderr.total,
            stdout_ref=_ref(stdout, scope, own_virtual),
            stderr_ref=_ref(stderr, scope, own_virtual),
            duration_seconds=outcome.duration,
            timed_out=outcome.timed_out,
            memory_changes=tuple(changes),
            memory_refused=tuple(refused),
            sandbox=backend.guarantees,
        )

    def _spec(
        self,
        scope: Scope,
        backend: Backend,
        command: str,
        timeout: float,
        staged: list[tuple[Mount, Path]],
    ) -> SandboxSpec:
        """The neutral sandbox spec of one command in ``scope``: its mounts (staging an
        overlay for each writable memory mount where the backend has a mount view)."""
        own = scope.own_scratch
        if not own.is_dir():
            own.mkdir(parents=True, exist_ok=True)
        overlay = backend.has_mount_view
        mounts = tuple(self._mount(scope, m, staged, overlay) for m in scope.mounts)
        private: Path | None = None
        if not backend.has_mount_view:
            private = scope.layout.state / "sandbox" / f"run-{uuid.uuid4().hex}"
            private.mkdir(parents=True)
        return SandboxSpec(
            argv=("/bin/bash", "-c", command),
            cwd=scope.cwd,
            mounts=mounts,
            limits=self.limits,
            timeout=timeout,
            private_dir=private,
        )

    async def _release(self, staged: list[tuple[Mount, Path]], private: Path | None) -> None:
        """Return clean staging folders for reuse; remove used ones and the private dir."""
        for _, folder in staged:
            if _changed(folder):
                await asyncio.to_thread(shutil.rmtree, folder, True)
            elif len(self._idle_staging) < _IDLE_STAGING_MAX:
                self._idle_staging.append(folder)
            else:
                shutil.rmtree(folder, True)
        if private is not None:
            await asyncio.to_thread(shutil.rmtree, private, True)

    def _mount(
        self, scope: Scope, mount: Mount, staged: list[tuple[Mount, Path]], overlay: bool
    ) -> SandboxMount:
        """The sandbox mount of one scope mount (missing stores show as empty folders).

        Without an overlay (a backend with no mount namespace) a writable memory
        mount is shown read-only: bash writes to memory need the staged commit."""
        source = mount.real
        if not source.is_dir():
            source = _empty_dir(scope)
        if mount.store is not None and mount.writable and not overlay:
            return SandboxMount(source, mount.virtual, MountMode.RO)
        if mount.store is not None and mount.writable:
            folder = self._staging(scope)
            staged.append((mount, folder))
            return SandboxMount(source, mount.virtual, MountMode.OVERLAY, folder)
        mode = MountMode.RW if mount.writable else MountMode.RO
        return SandboxMount(source, mount.virtual, mode)

    def _staging(self, scope: Scope) -> Path:
        """An empty staging folder set: an idle one of this data dir, or a new one."""
        root = scope.layout.state / "staging"
        while self._idle_staging:
            folder = self._idle_staging.pop()
            if folder.parent == root and not _changed(folder):
                return folder
            shutil.rmtree(folder, True)
        folder = root / uuid.uuid4().hex
        for name in ("upper", "work", "merged"):
            (folder / name).mkdir(parents=True)
        return folder

    def _commit(
        self, scope: Scope, staged: list[tuple[Mount, Path]]
    ) -> tuple[list[MemoryChange], list[str]]:
        changes: list[MemoryChange] = []
        refused: list[str] = []
        for mount, folder in staged:
            assert mount.store is not None
            found, not_kept = collect_changes(folder / "upper", mount.real)
            refused += [f"{mount.virtual}/{r.path}: {r.reason}" for r in not_kept]
            if not found:
                continue
            outcome = self.commit_staged(scope, mount.store, found)
            changes += [
                MemoryChange(path=f"{mount.virtual}/{c.path}", kind=c.kind, store=str(mount.store))
                for c in outcome.applied
            ]
            refused += [f"{mount.virtual}/{path}: {reason}" for path, reason in outcome.refused]
        return changes, refused


#: Idle staging folder sets kept for reuse (one per concurrent overlay command suffices).
_IDLE_STAGING_MAX = 16


async def _precheck(scope: Scope, command: str) -> CheckResult:
    """The pre-check, in a thread (a costly command must not stall the worker's event
    loop and its heartbeats) and fail-closed: a command it cannot finish reading is
    refused like any other, never an activity failure that would be retried."""
    try:
        return await asyncio.to_thread(check_command, scope, command)
    except Exception as err:  # any input must get an answer
        return CheckResult(
            f"{UNPARSEABLE}: the pre-check could not read it ({type(err).__name__}); "
            "simplify the command"
        )


def _changed(staging: Path) -> bool:
    """Whether the command wrote anything through this overlay."""
    try:
        with os.scandir(staging / "upper") as entries:
            return next(entries, None) is not None
    except OSError:
        return False


def _ref(sink: OutputSink, scope: Scope, own_virtual: PurePosixPath) -> str | None:
    if not sink.spilled:
        return None
    rel = sink.path.relative_to(scope.own_scratch)
    return str(own_virtual.joinpath(*rel.parts))


def _empty_dir(scope: Scope) -> Path:
    path = scope.layout.state / "sandbox" / "empty"
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        os.chmod(path, 0o555)
    return path


def _heartbeat(stdout_bytes: int, stderr_bytes: int) -> None:
    activity.heartbeat({"stdout_bytes": stdout_bytes, "stderr_bytes": stderr_bytes})
