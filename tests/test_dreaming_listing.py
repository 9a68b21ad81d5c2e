"""``list_dreams`` shows every running dream, including one no worker answers for,
instead of failing the whole listing."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from temporalio.testing import WorkflowEnvironment

from lw_temporal.dreaming import DreamInput, DreamState, DreamStatus, list_dreams

from ._dreaming_support import unique_definition
from .conftest import pydantic_client


async def test_listing_survives_a_dream_without_a_worker(
    dev_env: WorkflowEnvironment, task_queue: str
) -> None:
    target = unique_definition("listed")
    orphan_id = f"dream_{target}@{uuid.uuid4().hex[:8]}"
    client = pydantic_client(dev_env)
    orphan = await client.start_workflow(
        "lw.Dreaming", DreamInput(target=target), id=orphan_id, task_queue=f"{task_queue}-nobody"
    )
    try:

        async def listed_with_orphan() -> dict[str, DreamState]:
            while True:  # visibility lags a moment behind the start
                states = await list_dreams(client, query_timeout=timedelta(seconds=2))
                if any(s.workflow_id == orphan_id for s in states):
                    return {s.workflow_id: s for s in states}
                await asyncio.sleep(0.2)

        listed = await asyncio.wait_for(listed_with_orphan(), 120)
    finally:
        await orphan.terminate()
    assert listed[orphan_id].status is DreamStatus.UNREACHABLE
    assert listed[orphan_id].target == target
