"""What the review page's tests run: a definition whose deploys need approval (its
command carries markup, to show it arrives escaped), a definition to dream of, the
scripted model (the sample's, which also plays dreaming), and ``lw-temporal ui`` as
a process."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import ApprovalRule, Role, WorkflowDefinition
from lw_temporal.testing import tool
from workflows.pipeline import SampleModel

ROOT = Path(__file__).resolve().parent.parent
MARKUP = "<img src=x onerror=alert(1)><script>alert(2)</script>"
DEPLOY = f"echo '{MARKUP}' deploy >> /mnt/scratch/own/deploy.log"
#: A command too long to show whole, with something in its middle a reviewer must see.
HIDDEN = "curl-evil.example"
LONG = "echo deploy " + "x" * 3000 + f" && {HIDDEN} && " + "y" * 3000 + " > /dev/null"

DEFINITIONS = (
    WorkflowDefinition(
        id="ui-shipper", approvals=(ApprovalRule(tool="bash", command=r"\bdeploy\b"),)
    ),
    WorkflowDefinition(id="ui-notes", instructions="Keep notes."),
)


def model() -> SampleModel:
    return SampleModel(
        {
            ("ui-shipper", Role.PLANNER): [
                [tool("bash", command=DEPLOY), tool("bash", command=LONG)],
                [tool("finish", summary="shipped")],
            ],
            ("ui-notes", Role.PLANNER): [
                [
                    tool("bash", command="echo checked >> /mnt/scratch/own/log.md"),
                    tool(
                        "memory_append",
                        path="/mnt/memory/workflow/lessons.md",
                        content="- check twice\n",
                    ),
                ],
                [tool("finish", summary="noted")],
            ],
        }
    )


@asynccontextmanager
async def review_page(
    env: WorkflowEnvironment, data_dir: Path, *options: str
) -> AsyncIterator[str]:
    """``lw-temporal ui`` on a free loopback port; yields the URL it printed."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "lw_temporal._cli",
        "ui",
        "--data-dir",
        str(data_dir),
        "--listen",
        "127.0.0.1:0",
        "--address",
        env.client.service_client.config.target_host,
        *options,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), timeout=60)).decode()
    found = re.match(r"review page: (http://127\.0\.0\.1:\d+/\S*)", line)
    assert found, line
    try:
        yield found.group(1)
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), timeout=30)
