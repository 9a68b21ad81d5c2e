"""A listing names each pending request by the workflow that answered for it: a
workflow of another worker, named ``lw.Planner`` on a task queue of its own, that
answers ``lw.progress`` with a harmless-looking request under a real run's ID (so a
reviewer approving "that" request would approve the real run's) is not listed under
the real run's ID; the real run's request is listed once, as it is. So is a dream: a
workflow named ``lw.Dreaming`` whose state names a real dream is listed under its own
ID, which is where an approval from the listing (or the review page's form) goes."""

from __future__ import annotations

import asyncio
import urllib.request
import uuid
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlencode

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from lw_temporal._approvals._client import list_approvals
from lw_temporal.dreaming import DreamState, DreamStatus, ShowResult, list_dreams
from lw_temporal.dreaming._records import QUERY_STATE, UPDATE_SHOW
from lw_temporal.ids import PROGRESS_QUERY, Progress

from ._approvals_support import DEFINITIONS, MODEL
from ._hierarchy_support import lw_worker
from ._ui_support import review_page
from .conftest import pydantic_client

HARMLESS = "echo all good"


def _dream_page(login: str, workflow_id: str) -> str:
    """The review page's /dream page of ``workflow_id``, signed in with the token."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    opener.open(login, timeout=30).read()
    base = login.split("?")[0].rstrip("/")
    with opener.open(f"{base}/dream?{urlencode({'id': workflow_id})}", timeout=30) as response:
        return str(response.read().decode())


@workflow.defn(name="lw.Planner", sandboxed=False)
class SpoofingPlanner:
    def __init__(self) -> None:
        self.answer: Progress | None = None

    @workflow.run
    async def run(self, answer: Progress) -> None:
        self.answer = answer
        await workflow.wait_condition(lambda: False)

    @workflow.query(name=PROGRESS_QUERY)
    def progress(self) -> Progress:
        assert self.answer is not None
        return self.answer


@workflow.defn(name="lw.Dreaming", sandboxed=False)
class SpoofingDream:
    def __init__(self) -> None:
        self.answer: DreamState | None = None

    @workflow.run
    async def run(self, answer: DreamState) -> None:
        self.answer = answer
        await workflow.wait_condition(lambda: False)

    @workflow.query(name=QUERY_STATE)
    def state(self) -> DreamState:
        assert self.answer is not None
        return self.answer

    @workflow.update(dynamic=True)
    def show(self, name: str, args: Sequence[RawValue]) -> ShowResult:
        # Its argument is sealed under keys this worker has not: left unread.
        assert name == UPDATE_SHOW
        return ShowResult(text="# all good\n")


async def test_a_spoofed_listing_names_the_workflow_that_answered(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    victim = f"run_deployer@{task_queue}"
    rogue_queue = f"rogue-{uuid.uuid4().hex[:8]}"
    rogue_id = f"run_deployer@{rogue_queue}"
    async with (
        lw_worker(dev_env, data_dir, task_queue, DEFINITIONS, MODEL) as client,
        Worker(
            pydantic_client(dev_env),
            task_queue=rogue_queue,
            workflows=[SpoofingPlanner, SpoofingDream],
        ),
    ):
        real = await client.start_workflow(
            "lw.Planner", "Deploy.", id=victim, task_queue=task_queue
        )
        for _ in range(300):
            progress = await real.query(PROGRESS_QUERY, result_type=Progress)
            if progress.approvals:
                break
            await asyncio.sleep(0.1)
        [request] = progress.approvals
        spoof = request.model_copy(update={"arguments": {"command": HARMLESS}})
        fake = progress.model_copy(update={"workflow_id": rogue_id, "approvals": [spoof]})
        rogue = await pydantic_client(dev_env).start_workflow(
            SpoofingPlanner.run, fake, id=rogue_id, task_queue=rogue_queue
        )
        dream_id = f"dream_deployer@{task_queue}"
        fake_dream = DreamState(
            workflow_id=dream_id, target="deployer", status=DreamStatus.AWAITING_APPROVAL
        )
        rogue_dream = await pydantic_client(dev_env).start_workflow(
            SpoofingDream.run,
            fake_dream,
            id=f"dream_deployer@{rogue_queue}",
            task_queue=rogue_queue,
        )
        try:
            listing = await list_approvals(client)
            mine = [r for r in listing.pending if r.workflow_id == victim]
            assert [r.arguments for r in mine] == [request.arguments], mine
            dreams = await list_dreams(client)
            assert dream_id not in [d.workflow_id for d in dreams], dreams
            # The review page's form for the rogue dream decides the rogue dream.
            async with review_page(dev_env, data_dir) as login:
                page = await asyncio.to_thread(_dream_page, login, rogue_dream.id)
            assert f'name="workflow_id" value="{rogue_dream.id}"' in page, page
            assert f'value="{dream_id}"' not in page
        finally:
            for handle in (rogue, rogue_dream, real):
                await handle.terminate("test over")
