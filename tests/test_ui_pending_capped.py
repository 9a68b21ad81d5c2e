"""The approvals page shows a bounded number of pending requests, and counts the rest.

Every running lw workflow's pending requests used to go on one page, each a form with
its arguments (and, for a cut call, the whole call read from its run's conversation):
up to 500 workflows of up to 50 requests each. Three runs of 50 requests each (150)
now give a page of the oldest ``PENDING_SHOWN`` (100) forms that says 50 more are not
shown and where to list them all.
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentResult, ApprovalRule, Role
from lw_temporal import WorkflowDefinition as Definition
from lw_temporal._approvals._client import list_approvals
from lw_temporal._approvals._records import REQUESTS_PER_REPLY
from lw_temporal._ui._views import PENDING_SHOWN
from lw_temporal.testing import ScriptedModel, running_worker, tool

from ._ui_support import review_page

RUNS = 3
DEFINITIONS = [Definition(id="crowd", approvals=(ApprovalRule(tool="bash", command="^true"),))]
CALLS = [tool("bash", command=f"true {n}") for n in range(REQUESTS_PER_REPLY)]
MODEL = ScriptedModel({("crowd", Role.PLANNER): [CALLS]})


def _page(login: str) -> str:
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    with opener.open(login, timeout=60) as response:  # signs in, then the page itself
        assert urlsplit(response.url).query == "", response.url
        return str(response.read().decode())


async def test_a_crowd_of_requests_is_shown_capped_with_a_count(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    total = RUNS * REQUESTS_PER_REPLY
    assert total > PENDING_SHOWN
    async with running_worker(
        dev_env.client,
        data_dir=data_dir,
        definitions=DEFINITIONS,
        model=MODEL,
        task_queue=task_queue,
    ) as client:
        handles = [
            await client.start_workflow(
                "lw.Planner",
                "go",
                id=f"run_crowd@{task_queue}-{n}",
                task_queue=task_queue,
                result_type=AgentResult,
            )
            for n in range(RUNS)
        ]
        for _ in range(600):
            if len((await list_approvals(client)).pending) >= total:
                break
            await asyncio.sleep(0.2)
        else:
            raise AssertionError(f"never {total} pending requests")
        try:
            async with review_page(dev_env, data_dir) as login:
                page = await asyncio.to_thread(_page, login)
        finally:
            for handle in handles:
                await handle.terminate("test over")
    assert f"{total} pending across" in page
    assert page.count('<section class="card request"') == PENDING_SHOWN
    assert f"The oldest {PENDING_SHOWN} are shown; {total - PENDING_SHOWN} more are not" in page
    assert "lw-temporal approvals list" in page
