"""A command's sandbox spec, and staging its writable memory mounts and committing what
it changed there, as methods of the bash activities (a mixin): overlay staging folders
reused while clean, a tainted run's held changes under its overlay, the store's rules
applied to every change, the refused ones listed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ._bash_identity import CommandIdentities

# The request and result models live beside this module; importers keep finding them here.
from ._bash_models import BashRequest as BashRequest
from ._bash_models import BashResult as BashResult
from ._bash_models import MemoryChange as MemoryChange
from ._bash_parts import (
    _account,
    _beating,
    _discard,
    _empty_dir,
    _refusal,
)
from ._changes import CommandTaint, CommitMark, Committer
from ._egress import (
    PROXY_HOST,
    PROXY_PORT,
    EgressSession,
    proxy_environment,
)
from ._mode import Mode
from ._sandbox import (
    Backend,
    CaptureLimits,
    Limits,
    SandboxMount,
    SandboxNetwork,
    SandboxSpec,
    SandboxUser,
    StagingPool,
    WorkerClaim,
    collect_changes,
    make_staging,
    release_staging,
    shown_name,
    staging_root,
)
from ._scope import Mount, Scope
from .errors._kinds import MEMORY_COMMIT_FAILED, lw_error

#: Each staging folder in use: its store's change-log mark from before its command.
_MARKS: dict[Path, int | None] = {}

#: The last refusal of a command whose memory changes were all discarded at capture.
DISCARDED = "memory changes discarded: nothing of this command's memory changes was kept"


class StagedMemory:
    """What a command changed in its staged memory reaches the stores through the stores'
    rules, or not at all (it needs the activities' identities, limits, claim and
    committer)."""

    user: SandboxUser | None
    identities: CommandIdentities
    limits: Limits
    taint: CommandTaint | None
    commit_staged: Committer
    commit_mark: CommitMark
    capture_limits: CaptureLimits
    _staging_pool: StagingPool

    def claim(self) -> WorkerClaim:
        raise NotImplementedError

    def _spec(
        self,
        scope: Scope,
        backend: Backend,
        command: str,
        timeout: float,
        staged: list[tuple[Mount, Path]],
        *,
        user: SandboxUser | None = None,
        network: EgressSession | None = None,
    ) -> SandboxSpec:
        """The neutral sandbox spec of one command in ``scope`` run as ``user`` (leased
        here when not given): its mounts (staging an overlay for each writable memory
        mount where the backend has a mount view)."""
        own = scope.own_scratch
        if not own.is_dir():
            own.mkdir(parents=True, exist_ok=True)
        if user is None:
            user = self.identities.user(scope, timeout)
        if user is not None:
            user.own(own, 0o750)
        overlay = backend.has_mount_view
        mounts = tuple(self._mount(scope, m, staged, overlay, user) for m in scope.mounts)
        private: Path | None = None
        if not backend.has_mount_view:
            private = scope.layout.local_state / "sandbox" / f"run-{self.claim().name()}"
            private.mkdir(parents=True)
        return SandboxSpec(
            argv=("/bin/bash", "-c", command),
            cwd=scope.cwd,
            mounts=mounts,
            env=proxy_environment() if network is not None else {},
            limits=self.limits,
            timeout=timeout,
            private_dir=private,
            user=user,
            account=_account(scope),
            network=None
            if network is None
            else SandboxNetwork(network.sandbox.fileno(), (PROXY_HOST, PROXY_PORT)),
        )

    async def _release(
        self,
        staged: list[tuple[Mount, Path]],
        private: Path | None,
        heartbeat: Callable[[int, int], None] | None,
    ) -> None:
        """Return clean staging folders for reuse; remove used ones and the private dir
        (heartbeating: removing what a command left, 50,000 folders, can take long)."""
        keep_alive = None if heartbeat is None else lambda: heartbeat(0, 0)
        for _, folder in staged:
            _MARKS.pop(folder, None)
            for gone in self._staging_pool.keep(folder):
                release_staging(gone)
                await _beating(keep_alive, _discard, gone)
        if private is not None:
            await _beating(keep_alive, _discard, private)

    def _mount(
        self,
        scope: Scope,
        mount: Mount,
        staged: list[tuple[Mount, Path]],
        overlay: bool,
        user: SandboxUser | None,
    ) -> SandboxMount:
        """The sandbox mount of one scope mount (missing stores show as empty folders).

        Without an overlay (a backend with no mount namespace) a writable memory
        mount is shown read-only: bash writes to memory need the staged commit."""
        source = mount.real
        overlaid = mount.store is not None and mount.writable and overlay
        if not source.is_dir():
            empty = _empty_dir(scope, mount.virtual)
            if not overlaid:
                return SandboxMount(empty, mount.virtual, Mode.RO, empty=True)
            source = empty
        if mount.store is not None and mount.writable and not overlay:
            return SandboxMount(source, mount.virtual, Mode.RO)
        if mount.store is not None and mount.writable:
            # A tainted run's writes to this store are held: its overlay starts from
            # them, in a staging folder of its own (a reused one may be mounted).
            held = self.taint is not None and self.taint.holds(scope, mount)
            # the store's change log before the command: what others change meanwhile
            # is not overwritten by what the command made of the earlier content
            mark = self.commit_mark(scope, mount.store)
            folder = self._staging(scope, user, fresh=held)
            _MARKS[folder] = mark
            if held and self.taint is not None:
                self.taint.populate(scope, mount, folder / "upper", user)
            staged.append((mount, folder))
            return SandboxMount(source, mount.virtual, Mode.RW, folder)
        return SandboxMount(source, mount.virtual, mount.mode)

    def _staging(self, scope: Scope, user: SandboxUser | None, *, fresh: bool = False) -> Path:
        """An empty staging folder set of ``user``: an idle one of this data dir left
        pristine by its last command (see ``_sandbox._staging``; unless ``fresh``), or
        a new one."""
        root = staging_root(scope.layout.local_state / "staging", self.user, self.claim().owner)
        if fresh:
            return make_staging(root / self.claim().name(), user)
        folder, stale = self._staging_pool.take(root, user)
        for gone in stale:
            release_staging(gone)
            _discard(gone)
        return folder or make_staging(root / self.claim().name(), user)

    def _commit(
        self, scope: Scope, staged: list[tuple[Mount, Path]], held: list[str]
    ) -> tuple[list[MemoryChange], list[str]]:
        """Capture every overlay, then commit each store's changes (``held`` gets the
        mounts whose changes went to the run's quarantine); a capture that blocks (a
        hostile name or shape) keeps nothing of the command."""
        captured = [
            (mount, *collect_changes(folder / "upper", mount.real, self.capture_limits))
            for mount, folder in staged
        ]
        refused = [_refusal(mount, r.path, r.reason) for mount, _, kept in captured for r in kept]
        if any(r.blocks for _, _, kept in captured for r in kept):
            return [], [*refused, DISCARDED]
        changes: list[MemoryChange] = []
        folder_of = {id(mount): folder for mount, folder in staged}
        for mount, found, _ in captured:
            assert mount.store is not None
            if not found:
                continue
            try:
                outcome = self.commit_staged(
                    scope, mount.store, found, since=_MARKS.get(folder_of[id(mount)])
                )
            except OSError as err:
                raise lw_error(
                    MEMORY_COMMIT_FAILED,
                    f"workflow {scope.workflow_id}: committing the "
                    f"command's changes to {mount.store} ({mount.virtual}) failed: "
                    f"{shown_name(str(err))}; nothing of it was kept",
                ) from None
            changes += [
                MemoryChange(
                    path=f"{mount.virtual}/{shown_name(c.path)}",
                    kind=c.kind,
                    store=str(mount.store),
                )
                for c in outcome.applied
            ]
            if outcome.held and outcome.applied:
                held.append(str(mount.virtual))
            refused += [_refusal(mount, path, reason) for path, reason in outcome.refused]
        return changes, refused
