"""Two deployments on one server and host (separate data dirs, each its own key store,
both with a definition of one name) each schedule a dream of it, and each dream runs:
a scheduled dream's input is sealed with the key of the tree ``dream_<target>@scheduled``
in the store of the workers that serve the schedule's task queue, never in another
deployment's store that holds a key of the same tree id (there it was a workflow task
its workers could not decode, retried forever)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from ._live_support import lw, worker_process

DEFINITIONS = "tests._hostile_text_support:DEFINITIONS"
MODEL = "tests._hostile_text_support:MODEL"


@pytest_asyncio.fixture(scope="module")
async def two_deployments(
    dev_env: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[Path, Path]]:
    first, second = tmp_path_factory.mktemp("first-data"), tmp_path_factory.mktemp("second-data")
    async with (
        worker_process(dev_env, first, "first-deployment", definitions=DEFINITIONS, model=MODEL),
        worker_process(dev_env, second, "second-deployment", definitions=DEFINITIONS, model=MODEL),
    ):
        yield first, second


async def test_each_deployments_scheduled_dream_runs(
    dev_env: WorkflowEnvironment, two_deployments: tuple[Path, Path]
) -> None:
    for data, queue in zip(two_deployments, ("first-deployment", "second-deployment"), strict=True):
        code, out, err = await lw(
            dev_env, "run", "hostile", "Leave a note.", "--task-queue", queue, "--id", queue
        )
        assert code == 0, (out, err)
        schedule = f"lw-dream-{queue}"
        code, out, err = await lw(
            dev_env, "dream", "schedule", "hostile", "--every", "1h", "--now",
            "--task-queue", queue, "--schedule-id", schedule,
        )  # fmt: skip
        assert code == 0, (out, err)
        dream = re.search(r"^started (dream_hostile@\S+)$", out, re.M)
        assert dream, out
        code, out, err = await lw(dev_env, "dream", "show", dream[1], "--data-dir", str(data))
        assert code == 0, (queue, out, err)
        assert "+++ b/hostile/lessons.md" in out, out
        await dev_env.client.get_schedule_handle(schedule).delete()
