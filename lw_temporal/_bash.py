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
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path, PurePosixPath

from temporalio import activity
from temporalio.exceptions import ApplicationError

from ._approvals._bashview import bash_view
from ._bash_identity import CommandIdentities, secure_layout

# The request and result models live beside this module; importers keep finding them here.
from ._bash_models import BashRequest as BashRequest
from ._bash_models import BashResult as BashResult
from ._bash_models import MemoryChange as MemoryChange
from ._bash_parts import (
    BACKGROUND_NOTE,
    _beating,
    _heartbeat,
    _hint,
    _ref,
    _saved_note,
    _with_tails,
    decode_output,
)
from ._bash_staging import StagedMemory
from ._changes import CommandTaint, CommitMark, CommitOutcome, Committer, StoreChange
from ._config import LwConfig
from ._egress import (
    EgressService,
    EgressSession,
    NetworkUse,
    ProxyLimits,
)
from ._ids import BASH_ACTIVITY
from ._locks import lock_exclusive
from ._pathcheck import CHECK_BUDGET_SECONDS, precheck, withhold_outside
from ._sandbox import (
    Backend,
    CaptureLimits,
    Limits,
    OutputSink,
    SandboxSpec,
    SandboxUnavailable,
    SandboxUser,
    StagingPool,
    SweepReport,
    WorkerClaim,
    apply_changes,
    run_sandboxed,
    select_backend,
    self_test,
    staging_changed,
    sweep,
)
from ._sandbox._leases import LeaseRefused
from ._sandbox._netbroker import NO_BROKER
from ._sandbox._oom import protect_worker
from ._scope import Mount, Scope, StoreRef
from .errors._kinds import SANDBOX_FAILED, SANDBOX_UNAVAILABLE, lw_error

activity_logger = logging.getLogger(__name__)
#: ``exit_code`` of a command the pre-check refused (bash's "cannot execute").
REJECTED_EXIT_CODE = 126
#: ``exit_code`` of a command killed by its timeout (as coreutils ``timeout``).
TIMEOUT_EXIT_CODE = 124
#: Folder (inside the own scratch) holding full outputs that did not fit the result.
OUTPUT_FOLDER = ".bash-output"
#: The saved outputs of an agent's earlier commands are cut, oldest first, to this
#: fraction of its scratch quota (a quarter: 256 MiB of the default 1 GiB).
SAVED_OUTPUT_SHARE = 4


def apply_staged(
    scope: Scope, store: StoreRef, changes: Sequence[StoreChange], *, since: int | None = None
) -> CommitOutcome:
    """The plain commit: apply the changes to the store folder under a per-store lock."""
    root = store.path(scope.layout)
    locks = scope.layout.state / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{store.kind.value}-{store.key}.lock", "w") as lock:
        lock_exclusive(lock.fileno())
        root.mkdir(parents=True, exist_ok=True)
        apply_changes(root, list(changes))
    return CommitOutcome(applied=list(changes), refused=[])


class BashActivities(StagedMemory):
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
        commit_mark: where a store's change log ends before a command (for
            ``commit_staged``'s ``since``).
        capture_limits: the most one command may leave in a writable memory mount
            (entries, depth, sizes, name lengths) before any of it is committed.
        sandbox_ids: the host ids a root worker leases to agents, one uid and gid per
            agent and one group per memory store (the first is the group they share;
            default ``DEFAULT_IDS``); a non-root worker runs every command as itself.
        egress: the egress proxy's per-command limits (agents with a network policy).
        taint: the memory side's taint rules (what a command's view and network use
            make of its run, and the held view of a tainted run's stores); ``None``:
            commands taint nothing.
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
        commit_staged: Committer | None = None,
        commit_mark: CommitMark | None = None,
        capture_limits: CaptureLimits | None = None,
        sandbox_ids: range | None = None,
        egress: ProxyLimits | None = None,
        taint: CommandTaint | None = None,
    ) -> None:
        self.config = config
        self.taint = taint
        self.sandbox = sandbox
        self.output_cap = output_cap
        self.saved_output_cap = saved_output_cap
        self.default_timeout = default_timeout
        self.max_timeout = max_timeout
        self.limits = limits or Limits()
        self.commit_staged: Committer = commit_staged or apply_staged
        self.commit_mark: CommitMark = commit_mark or (lambda _scope, _store: None)
        self.capture_limits = capture_limits or CaptureLimits()
        layout = config.layout
        self.identities = CommandIdentities(layout, sandbox_ids)
        #: Who the self-test runs as: the shared id, which is no agent's uid.
        self.user = SandboxUser.for_worker(sandbox_ids)
        #: Why agents cannot use the data dir, once it was secured (at the first
        #: command's backend, never at construction: a client's plugin or a worker
        #: whose roots are refused must leave the disk as it found it).
        self._data_dir_problem: str | None = None
        self._data_dir_secured = False
        self._backend: Backend | None = None
        self._tested: str | None = None
        self._testing = asyncio.Lock()
        self._scopes: dict[tuple[str, str], Scope] = {}
        #: Idle staging folders, reused by the next command of the same agent.
        self._staging_pool = StagingPool()
        self._claim: WorkerClaim | None = None
        #: The worker's egress proxy (its process starts with the first command of an
        #: agent with a network policy).
        self.egress = EgressService(config.layout.local_state, egress)

    @property
    def callables(self) -> tuple[Callable[..., object], ...]:
        return (self.bash,)

    def backend(self) -> Backend:
        if self._backend is None:
            try:
                backend = select_backend(self.sandbox)
                if not self._data_dir_secured:
                    self._data_dir_problem = (
                        self.identities.problem
                        or secure_layout(self.config.layout, self.identities.shared_gid)
                        or self.identities.check()
                    )
                    self._data_dir_secured = True
                if self._data_dir_problem is not None:
                    raise SandboxUnavailable(self._data_dir_problem)
            except SandboxUnavailable as err:
                raise lw_error(SANDBOX_UNAVAILABLE, f"lw.bash cannot run here: {err}") from None
            self._backend = backend
        return self._backend

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """Around a worker's run: select and self-test the backend before the first
        command. A failure is logged here and refuses every command (typed,
        non-retryable), while the worker's other activities keep serving."""
        await asyncio.to_thread(self.sweep_leftovers)
        protect_worker()
        try:
            await self.ready_backend()
        except ApplicationError as err:
            activity_logger.warning("lw.bash will refuse every command: %s", err.message)
        if any(d.network is not None for d in self.config.definitions.values()):
            with contextlib.suppress(OSError):  # else the first such command says why
                self.egress.start()
        try:
            yield
        finally:
            self.egress.stop()

    def claim(self) -> WorkerClaim:
        """This worker's claim on the folders it stages commands in (taken once)."""
        if self._claim is None:
            self._claim = WorkerClaim(self.config.layout.local_state)
        return self._claim

    def sweep_leftovers(self) -> SweepReport:
        """Remove the staging and private folders of workers that were killed (never a
        running peer's; see :mod:`._sandbox._leftovers`)."""
        try:
            own = self.claim().owner
            return sweep(self.config.layout.local_state, keep=own)
        except OSError as err:
            activity_logger.warning("lw.bash: leftover staging not swept: %s", err)
            return SweepReport()

    async def ready_backend(self) -> Backend:
        """The backend, once its self-test has passed on this worker (fail closed:
        a backend whose guarantees do not hold here serves no command)."""
        backend = self.backend()
        if self._tested != backend.name:
            async with self._testing:
                if self._tested != backend.name:
                    try:
                        await self_test(backend, self.config.layout.state, self.user, self.limits)
                    except SandboxUnavailable as err:
                        raise lw_error(
                            SANDBOX_UNAVAILABLE, f"lw.bash refuses to run here: {err}"
                        ) from None
                    self._tested = backend.name
        return backend

    def _scope(self) -> Scope:
        """The calling activity's scope (derived from ``activity.info()`` only), kept
        per workflow: the configuration is fixed, so the derivation is pure."""
        info = activity.info()
        key = (info.workflow_id or "", info.workflow_type or "")
        scope = self._scopes.get(key)
        if scope is None:
            # A store an approval rule guards is read-only to bash (_approvals._bashview).
            scope = bash_view(self.config.caller_scope())
            self.config.settle(scope)
            if len(self._scopes) >= 1024:
                self._scopes.clear()
            self._scopes[key] = scope
        return scope

    @activity.defn(name=BASH_ACTIVITY)
    async def bash(self, request: BashRequest) -> BashResult:
        # In a thread, heartbeating: a run's first scope records its manifest, which
        # can wait for a store's lock while another command commits. A known scope is
        # a dict lookup, with no thread to wake.
        info = activity.info()
        scope = self._scopes.get((info.workflow_id or "", info.workflow_type or ""))
        # The server confirms the caller once per run (a dict lookup afterwards).
        await self.config.callers.verify((scope or self.config.caller_scope()).agent_id)
        if scope is None:
            scope = await _beating(lambda: _heartbeat(0, 0), self._scope)
        safe_id = "".join(c if c.isalnum() or c in "._-" else "_" for c in info.activity_id)
        tag = f"{safe_id[:64]}-{info.attempt}-{uuid.uuid4().hex[:6]}"
        return await self.run(
            scope, request, tag=tag, heartbeat=_heartbeat, run_id=info.workflow_run_id or ""
        )

    async def run(
        self,
        scope: Scope,
        request: BashRequest,
        *,
        tag: str,
        heartbeat: Callable[[int, int], None] | None = None,
        run_id: str = "",
    ) -> BashResult:
        """Check and run one command in ``scope`` (the activity body, callable directly
        by code that already holds a trusted scope, such as benchmarks)."""
        known = self._backend
        if known is None:  # not selected yet (a caller without serving()): select it now
            with contextlib.suppress(ApplicationError):
                known = self.backend()
        check = await precheck(
            scope, request.command, staged_memory=known is None or known.has_mount_view
        )
        if check.rejection is not None:
            return BashResult(
                exit_code=REJECTED_EXIT_CODE,
                stdout="",
                stderr=check.rejection + "\n",
                rejection=check.rejection,
                sandbox=self._backend.guarantees if self._backend else self.sandbox,
            )
        backend = await self.ready_backend()
        if self.taint is not None:
            self.taint.before_command(scope)  # a few stat calls: what the view holds
        timeout = min(request.timeout_seconds or self.default_timeout, self.max_timeout)
        user = await self._user(scope, timeout, heartbeat)
        staged: list[tuple[Mount, Path]] = []
        held: list[str] = []
        spec: SandboxSpec | None = None
        network = await self._network(scope, backend, tag, run_id)
        use: NetworkUse | None = None
        try:
            spec = self._spec(
                scope, backend, request.command, timeout, staged, user=user, network=network
            )
            out_dir = scope.own_scratch / OUTPUT_FOLDER
            keep = spec.limits.writable_bytes // SAVED_OUTPUT_SHARE  # earlier commands'
            stdout = OutputSink(
                self.output_cap, self.saved_output_cap, out_dir / f"{tag}.stdout", user, keep
            )
            stderr = OutputSink(
                self.output_cap, self.saved_output_cap, out_dir / f"{tag}.stderr", user, keep
            )
            live = None if heartbeat is None else _with_tails(heartbeat, stdout, stderr)
            if network is not None and self.taint is not None:
                self.taint.network_begins(scope)  # counts until the session says
            try:
                outcome = await run_sandboxed(backend, spec, stdout, stderr, heartbeat=live)
            except SandboxUnavailable as err:
                raise lw_error(
                    SANDBOX_UNAVAILABLE, f"workflow {scope.workflow_id}: lw.bash cannot run: {err}"
                ) from None
            finally:
                if self.taint is not None:  # what the view gained while it ran (a mail
                    self.taint.before_command(scope)  # dropped in the inbox) it may have read
            head_err = bytes(stderr.head)
            if outcome.launch_failed is not None:
                no_broker = network is not None and NO_BROKER in outcome.launch_failed
                raise lw_error(
                    SANDBOX_UNAVAILABLE if no_broker else SANDBOX_FAILED,
                    f"workflow {scope.workflow_id}: the sandbox could not be set up: "
                    f"{outcome.launch_failed}",
                )
            if network is not None:  # its processes are gone: what did it read?
                use, network = await self.egress.end(network), None
                self._network_taint(scope, use)
            changes: list[MemoryChange] = []
            refused: list[str] = []
            # A stopped command keeps nothing, and says so only when it changed something.
            changed = any(staging_changed(folder) for _, folder in staged)
            if changed and outcome.timed_out:
                refused.append("memory changes discarded: the command timed out")
            elif changed and outcome.quota_stopped:
                refused.append("memory changes discarded: the command was stopped at a quota")
            elif changed:
                beat = None if heartbeat is None else lambda: heartbeat(stdout.total, stderr.total)
                changes, refused = await _beating(beat, self._commit, scope, staged, held)
        finally:
            if network is not None:  # cancelled or failed: what it read still counts
                use = await self.egress.end(network)
                self._network_taint(scope, use)
            await self._release(staged, spec.private_dir if spec is not None else None, heartbeat)
        text_out = backend.present(spec, decode_output(bytes(stdout.head), cut=stdout.truncated))
        raw_err = decode_output(head_err, cut=stderr.truncated)
        head_text = backend.present(spec, raw_err)
        withheld: str | None = None
        listing_withheld = 0
        if check.lists_recursively and not backend.has_mount_view:
            # Under bwrap nothing outside the roots exists to be listed; without a
            # mount namespace the host's paths do, so their lines are held back.
            listing = await asyncio.to_thread(
                withhold_outside, scope, text_out, check.listing_cwd, budget=CHECK_BUDGET_SECONDS
            )
            text_out, listing_withheld, withheld = listing.text, listing.withheld, listing.note()
        hint = _hint(scope, backend, spec, raw_err) if outcome.exit_code != 0 else None
        own_virtual = PurePosixPath(scope.cwd)
        out_ref, err_ref = _ref(stdout, scope, own_virtual), _ref(stderr, scope, own_virtual)
        notes = [
            f"command timed out after {timeout:g}s" if outcome.timed_out else None,
            _saved_note("stdout", stdout, out_ref),
            _saved_note("stderr", stderr, err_ref),
            outcome.stopped,  # after the notes it explains: the last line, as README says
            withheld,
            hint,
            _held_note(held),
            BACKGROUND_NOTE if check.background else None,
        ]
        return BashResult(
            exit_code=TIMEOUT_EXIT_CODE if outcome.timed_out else outcome.exit_code,
            stdout=text_out,
            stderr=head_text
            + "".join(f"lw.bash: {note}\n" for note in notes if note)
            + (use.notes() if use is not None else ""),
            stdout_truncated=stdout.truncated,
            stderr_truncated=stderr.truncated,
            stdout_bytes=stdout.total,
            stderr_bytes=stderr.total,
            stdout_ref=out_ref,
            stderr_ref=err_ref,
            duration_seconds=outcome.duration,
            timed_out=outcome.timed_out,
            memory_changes=tuple(changes[:MAX_LISTED_CHANGES]),
            memory_changes_count=len(changes),
            memory_refused=tuple(refused[:MAX_LISTED_CHANGES]),
            memory_refused_count=len(refused),
            sandbox=backend.guarantees,
            stopped=outcome.stopped,
            listing_withheld=listing_withheld,
            hint=hint,
            network=use,
        )

    async def _user(
        self, scope: Scope, runs_for: float, heartbeat: Callable[[int, int], None] | None
    ) -> SandboxUser | None:
        """The command's host identity (a root worker's per-agent ids); leasing a new
        one touches the lease table, in a thread, heartbeating (giving a scratch to a
        new number re-owns all of it)."""
        own = scope.own_scratch
        if not own.is_dir():
            own.mkdir(parents=True, exist_ok=True)
        identities = self.identities
        try:
            if not identities.needs_io(scope, runs_for):
                return identities.user(scope, runs_for)
            beat = None if heartbeat is None else lambda: heartbeat(0, 0)
            return await _beating(beat, identities.user, scope, runs_for)
        except LeaseRefused as err:
            raise lw_error(SANDBOX_FAILED, f"workflow {scope.workflow_id}: {err}") from None

    def _network_taint(self, scope: Scope, use: NetworkUse) -> None:
        """A command that got network responses taints its run before its memory
        changes commit (so they are held); when the proxy could not say what the
        command read, the mark :meth:`TaintGate.network_begins` left stands, and the
        run counts tainted."""
        if self.taint is None:
            return
        if use.bytes_received == 0 and use.proxy_error is not None:
            return
        self.taint.after_network(scope, use.hosts, use.bytes_received)

    async def _network(
        self, scope: Scope, backend: Backend, tag: str, run_id: str
    ) -> EgressSession | None:
        """A proxy session for a command of an agent with a network policy (None for
        every other command: no proxy, no change to its sandbox)."""
        if scope.network is None or not backend.brokers_network:
            return None
        try:
            return await self.egress.begin(
                workflow_id=scope.workflow_id, run_id=run_id, command=tag, policy=scope.network
            )
        except OSError as err:
            raise lw_error(
                SANDBOX_FAILED,
                f"workflow {scope.workflow_id}: the egress proxy cannot start: {err}",
            ) from None

    def user_of(self, scope: Scope) -> SandboxUser | None:
        """The host identity of ``scope``'s agent, for work done on its scratch outside a
        command (Claude's text editor): the uid its commands run as. Touches the lease
        table when the agent has none yet: call it in a thread."""
        return self.identities.user(scope, self.default_timeout)


#: The most memory changes (and refusals) a result lists; ``*_count`` gives the total.
MAX_LISTED_CHANGES = 100


def _held_note(mounts: list[str]) -> str | None:
    if not mounts:
        return None
    return (
        f"memory changes to {', '.join(f'{m}/' for m in mounts)} are held in quarantine: "
        "this run read untrusted input, so its changes to shared memory wait for a "
        "person's release (this run sees them, other runs do not yet)"
    )
