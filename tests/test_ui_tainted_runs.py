"""The review page says when a run waiting for approval is tainted (why, since when,
and that its shared writes wait in quarantine), and marks a tainted run in its tree's
manifests: a person approving a tainted run's call knows what the run has read.

Real dev server and worker; the page is ``lw-temporal ui`` behind a trusted header."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult
from lw_temporal.ids import AgentId

from ._approvals_support import DEFINITIONS, MODEL, until_listed
from ._hierarchy_support import lw_worker
from ._ui_support import review_page

USER = {"X-Auth-User": "carol"}


def _get(url: str) -> str:
    with urllib.request.urlopen(urllib.request.Request(url, headers=USER), timeout=30) as got:
        body: str = got.read().decode()
        return body


async def test_a_tainted_run_waiting_for_approval_says_so(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    run = str(AgentId.planner("deployer", f"{task_queue}-tainted"))
    async with lw_worker(dev_env, data_dir, task_queue, DEFINITIONS, MODEL) as client:
        handle = await client.start_workflow(
            "lw.Planner", AgentInput(task="deploy it", untrusted=True), id=run,
            task_queue=task_queue, result_type=AgentResult,
        )  # fmt: skip
        try:
            await until_listed(dev_env, run)
            async with review_page(dev_env, data_dir, "--trust-proxy-header", "X-Auth-User") as url:
                page = await asyncio.to_thread(_get, url)
                assert f"{run}</a>" in page, page
                assert "This run read untrusted input: tainted since 20" in page, page
                assert "its starter marked the task untrusted" in page
                assert "wait in quarantine" in page
                tree = await asyncio.to_thread(_get, f"{url}runs?id={run}")
                assert f"{run} (tainted)" in tree, tree
                assert "tainted since 20" in tree
        finally:
            await handle.terminate("test over")
