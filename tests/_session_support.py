"""Stand-in runs that stay open: one Temporal run per workflow ID for a whole test.

An lw activity acts only for a run the server confirms as the one its ID names, with
the parent that ID names, and only for the run chain that first used the ID. So the
stand-ins of the activity tests are started the way lw starts runs: a step under its
planner, a sub-run under its orchestrator, each as a child of a stand-in of its
parent, and each kept open, so that every call a test makes "as" an ID lands in the one
run that owns it. A test talks to a run by update (its calls) and the whole tree is
completed when the test's worker stops.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.service import RPCError

from lw_temporal.ids import parse_workflow_id

_T = TypeVar("_T")

START_CHILD = "start_child"
FINISH = "finish"


class StandIn:
    """Base of a stand-in workflow: it waits until told to finish, starts the children
    it is asked for (as the parent lw would be), and subclasses add the update that
    runs a test's calls."""

    def __init__(self) -> None:
        self._finished = False
        self._calls: set[asyncio.Task[Any]] = set()

    async def wait(self) -> None:
        """Until told to finish; cancelling the run cancels the calls it is making
        (their activities are asked to stop, as an lw run's would be).

        A call still running when the run is told to finish is one its test stopped
        waiting for (the test failed or gave up on it): it is cancelled the same way,
        and the run completes only once every handler has returned, so no update is
        cut off by the run's end."""
        try:
            await workflow.wait_condition(lambda: self._finished)
        except asyncio.CancelledError:
            await self._stop_calls()
            raise
        await self._stop_calls()
        await workflow.wait_condition(workflow.all_handlers_finished)

    async def _stop_calls(self) -> None:
        for task in self._calls:
            task.cancel()
        await asyncio.gather(*self._calls, return_exceptions=True)

    async def calling(self, call: Awaitable[_T]) -> _T:
        """Run one of the test's calls as a part of this run that its cancellation stops."""
        task = asyncio.ensure_future(call)
        self._calls.add(task)
        try:
            return await task
        finally:
            self._calls.discard(task)

    @workflow.signal(name=FINISH)
    def finish(self) -> None:
        self._finished = True

    @workflow.update(name=START_CHILD)
    async def start_child(self, child_id: str) -> None:
        await workflow.start_child_workflow(
            parse_workflow_id(child_id).workflow_type,
            id=child_id,
            parent_close_policy=workflow.ParentClosePolicy.TERMINATE,
        )


class Sessions:
    """The open stand-in runs of one test worker, by workflow ID."""

    def __init__(self, client: Client, task_queue: str) -> None:
        self.client = client
        self.task_queue = task_queue
        self._handles: dict[str, WorkflowHandle[Any, Any]] = {}

    async def handle(self, workflow_id: str) -> WorkflowHandle[Any, Any]:
        """The open run of ``workflow_id``, started (under its ancestors) if needed."""
        found = self._handles.get(workflow_id)
        if found is not None:
            return found
        agent_id = parse_workflow_id(workflow_id)
        if agent_id.parent is None:
            handle: WorkflowHandle[Any, Any] = await self.client.start_workflow(
                agent_id.workflow_type,
                id=workflow_id,
                task_queue=self.task_queue,
                execution_timeout=timedelta(minutes=30),
            )
        else:
            parent = await self.handle(str(agent_id.parent))
            await parent.execute_update(START_CHILD, workflow_id)
            handle = self.client.get_workflow_handle(workflow_id)
        self._handles[workflow_id] = handle
        return handle

    async def call(
        self, workflow_id: str, update: str, argument: Any, result_type: type[Any]
    ) -> Any:
        handle = await self.handle(workflow_id)
        try:
            return await handle.execute_update(update, argument, result_type=result_type)
        except WorkflowUpdateFailedError as err:
            # A call that fails fails like the one-run-per-call stand-ins' runs did.
            raise WorkflowFailureError(cause=err.cause) from err.cause

    async def close(self) -> None:
        """Let every run complete, the deepest first (a parent's close would terminate
        its children; a later test may reuse an ID on this server, and dreaming reads
        completed runs)."""
        for workflow_id in sorted(self._handles, key=lambda w: -w.count("/")):
            handle = self._handles[workflow_id]
            with contextlib.suppress(RPCError, WorkflowFailureError):
                await handle.signal(FINISH)
                await handle.result()
        self._handles.clear()
