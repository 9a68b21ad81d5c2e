"""Shared pieces of the hierarchy, replay, durability and demo tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from lw_temporal import Model, WorkflowDefinition
from lw_temporal.testing import running_worker


@asynccontextmanager
async def lw_worker(
    env: WorkflowEnvironment,
    data_dir: Path,
    task_queue: str,
    definitions: Sequence[WorkflowDefinition],
    model: Model,
    **plugin_options: Any,
) -> AsyncIterator[Client]:
    """A client and a running worker, both configured by one plugin."""
    async with running_worker(
        env.client,
        data_dir=data_dir,
        definitions=definitions,
        model=model,
        task_queue=task_queue,
        **plugin_options,
    ) as client:
        yield client


async def failure_type(handle: WorkflowHandle[Any, Any]) -> str | None:
    """The ApplicationError type a workflow failed with."""
    try:
        await asyncio.wait_for(handle.result(), timeout=120)
    except WorkflowFailureError as err:
        cause: BaseException | None = err.cause
        while cause is not None and not isinstance(cause, ApplicationError):
            cause = cause.__cause__
        assert cause is not None, repr(err.cause)
        return cause.type
    return None
