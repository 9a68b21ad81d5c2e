"""The retention activity; the data dir it cleans is the worker's own."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from temporalio import activity

from .._records import Provenance
from .._stores import MemoryStores
from .._worker import WorkerConfig
from ._gc import collect_garbage
from ._records import RETENTION_GC, RETENTION_WORKFLOW, GcReport, RetentionPolicy


class RetentionActivities:
    """The retention activity; the data dir it cleans is the worker's own."""

    def __init__(self, config: WorkerConfig) -> None:
        self.config = config

    @property
    def callables(self) -> tuple[Callable[..., object], ...]:
        return (self.gc,)

    @activity.defn(name=RETENTION_GC)
    async def gc(self, policy: RetentionPolicy) -> GcReport:
        # Only the retention workflow, on a queue this deployment serves, removes scratch.
        await self.config.callers.verify_workflow(RETENTION_WORKFLOW)
        info = activity.info()
        report = await collect_garbage(
            activity.client(),
            self.config.layout,
            policy,
            actor=f"workflow:{info.workflow_id}",
            progress=lambda details: activity.heartbeat(details),
        )
        if policy.dry_run:
            return report
        # each memory store's version retention policy, applied and audited per store
        pruned = await asyncio.to_thread(
            MemoryStores(self.config.layout).apply_retention,
            provenance=Provenance.admin(f"workflow:{info.workflow_id}"),
        )
        return report.model_copy(update={"versions_pruned": sum(p.removed for p in pruned)})
