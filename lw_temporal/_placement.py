"""Which runs root a run tree was placed on, carried to each of its activities.

A top-level run learns its runs root's id once, in ``lw.settings`` (the worker running
its first workflow task answers, see :meth:`._topology.Topology.pin_here`), keeps it in
its settings and hands it to its children with theirs. This interceptor then stamps
every activity the tree schedules (local ones included) with that id in a header, and
on the worker side makes it readable by :func:`placed_tree` while the activity runs, so
that :meth:`._topology.Topology.check_placement` can refuse an activity that landed on
a worker whose disk is not the tree's: a worker cannot tell from its own disk alone
whether a run it has no marker of is new or lives elsewhere (two workers with data dirs
of their own on one task queue).

The header only ever narrows: an activity whose header names another runs root fails,
one without a header is checked as before (its run's markers).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
    StartActivityInput,
    StartLocalActivityInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

#: The activity header that names the runs root (by id) of the calling run's tree.
TREE_HEADER = "lw-tree-runs-root"

_placed: ContextVar[str | None] = ContextVar("lw_placed_tree", default=None)


def placed_tree() -> str | None:
    """The runs root id the running activity's tree was placed on, if it said."""
    return _placed.get()


class PlacementInterceptor(Interceptor):
    """Stamps a tree's activities with its runs root and reads the stamp back."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _PlacedActivity(next)

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return _PlacingWorkflow


class _PlacedActivity(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        payload = input.headers.get(TREE_HEADER)
        tree = None if payload is None else payload.data.decode("utf-8", "replace") or None
        token = _placed.set(tree)
        try:
            return await self.next.execute_activity(input)
        finally:
            _placed.reset(token)


class _PlacingWorkflow(WorkflowInboundInterceptor):
    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        super().init(_PlacingOutbound(outbound))


class _PlacingOutbound(WorkflowOutboundInterceptor):
    def start_activity(self, input: StartActivityInput) -> workflow.ActivityHandle[Any]:
        input.headers = _stamped(input.headers)
        return super().start_activity(input)

    def start_local_activity(self, input: StartLocalActivityInput) -> workflow.ActivityHandle[Any]:
        input.headers = _stamped(input.headers)
        return super().start_local_activity(input)


def _stamped(headers: Any) -> Any:
    """``headers`` with the tree's runs root, when the workflow knows it (an lw agent
    whose settings carry it: ``tree_runs_id``)."""
    tree = getattr(workflow.instance(), "tree_runs_id", None)
    if not isinstance(tree, str) or not tree:
        return headers
    payload = Payload(metadata={"encoding": b"binary/plain"}, data=tree.encode("utf-8", "replace"))
    return {**headers, TREE_HEADER: payload}
