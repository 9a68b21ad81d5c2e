"""The worker-side configuration every activity holds: data layout, definitions and
the worker's place among the hosts.

It lives on the activity-holding objects, never in workflow inputs, so a workflow (or a
client that starts one) cannot point an activity at another data dir or definition set.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from temporalio import activity

from ._callers import CallerCheck
from ._definitions import DefinitionRegistry, WorkflowDefinition
from ._ids import DataLayout, InvalidWorkflowId
from ._scope import Scope, derive_scope
from ._topology import DEFAULT_HOST_TIMEOUT, Topology
from .errors._kinds import INVALID_WORKFLOW_ID, UNKNOWN_DEFINITION, lw_error


@dataclass(frozen=True)
class LwConfig:
    layout: DataLayout
    definitions: DefinitionRegistry
    topology: Topology
    #: Scopes derived so far, by (workflow id, workflow type): a scope is a pure function
    #: of them and this configuration, and every activity of an agent asks for its own.
    _scopes: dict[tuple[str, str], Scope] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    #: Who may call this worker's activities (the server's word on each run).
    callers: CallerCheck = field(default=None, compare=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.callers is None:
            object.__setattr__(self, "callers", CallerCheck(self.layout, self.topology.host))

    @classmethod
    def create(
        cls,
        data_dir: str | Path | None,
        definitions: Iterable[WorkflowDefinition],
        *,
        memory_root: str | Path | None = None,
        runs_root: str | Path | None = None,
        host: str | None = None,
        host_timeout: timedelta = DEFAULT_HOST_TIMEOUT,
        expected_memory_id: str | None = None,
    ) -> LwConfig:
        """``data_dir`` alone puts memory and runs in one folder; ``memory_root`` and
        ``runs_root`` (each defaulting to ``data_dir``) put them apart."""
        memory = memory_root if memory_root is not None else data_dir
        runs = runs_root if runs_root is not None else data_dir
        if memory is None or runs is None:
            raise ValueError(
                "give data_dir (memory and runs in one folder), or both memory_root and "
                "runs_root (memory on a shared volume, runs on this host's disk)"
            )
        layout = DataLayout.split(memory, runs)
        topology = Topology(
            layout, host=host, host_timeout=host_timeout, expected_memory_id=expected_memory_id
        )
        return cls(layout, DefinitionRegistry(definitions), topology)

    def scope_of(self, workflow_id: str, workflow_type: str) -> Scope:
        """The scope for a workflow, with grammar and registry errors made typed."""
        scope = self._scopes.get((workflow_id, workflow_type))
        if scope is not None:
            return scope
        try:
            scope = derive_scope(workflow_id, workflow_type, self.definitions, self.layout)
        except InvalidWorkflowId as err:
            raise lw_error(INVALID_WORKFLOW_ID, str(err)) from None
        except KeyError as err:
            raise lw_error(
                UNKNOWN_DEFINITION,
                f"workflow {workflow_id!r}: {err.args[0]}; register the definition in "
                "LittleWorkflowPlugin(definitions=[...]) on this worker",
            ) from None
        if len(self._scopes) >= 4096:
            self._scopes.clear()
        self._scopes[(workflow_id, workflow_type)] = scope
        return scope

    def caller_scope(self) -> Scope:
        """The calling activity's scope as ``activity.info()`` claims it (not yet
        confirmed by the server: see :meth:`activity_scope`)."""
        info = activity.info()
        if not info.workflow_id or not info.workflow_type:
            raise lw_error(
                INVALID_WORKFLOW_ID,
                "lw activities run only inside an lw workflow (no workflow id in activity info)",
            )
        return self.scope_of(info.workflow_id, info.workflow_type)

    def settle(self, scope: Scope) -> None:
        """A confirmed caller's first touch of this worker: it checks that this worker
        holds the run's scratch (a local activity too, by the tree's placement header:
        a tree cannot split across disks), and the run's manifest is recorded. May block on a
        store's lock (the manifest): call it in a thread where that matters."""
        info = activity.info()
        self.topology.check_placement(scope.workflow_id, scope.agent_id, local=info.is_local)
        from .memory._manifest import record_manifest  # the run's first touch records it

        record_manifest(
            self.layout, scope, run_id=info.workflow_run_id, workflow_type=info.workflow_type or ""
        )

    async def activity_scope(
        self, *, chain: str | None = None, parent_run: str | None = None
    ) -> Scope:
        """The calling activity's scope: from ``activity.info()`` only, never arguments,
        and only once the caller is confirmed as the run its ID names and its run chain
        owns the ID (``_callers``; ``chain`` and ``parent_run`` count only for a local
        activity, whose input its own workflow made on this worker)."""
        scope = self.caller_scope()
        await self.callers.verify(scope.agent_id, chain=chain, parent_run=parent_run)
        self.settle(scope)
        return scope
