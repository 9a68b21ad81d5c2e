"""Stand-in target runs for the dreaming tests.

The planner runs here are small stand-ins registered as ``lw.Planner``/``lw.Worker``
with grammar-conformant IDs: they execute real ``lw.bash``/``lw.memory.append``
activities (which touch the real data dir), so their histories have the same events a
full agent run has.

The SDK builds each new run's workflow sandbox on the worker's event loop: the stand-ins
run outside it (this module reloaded there took one to three seconds of the loop per
run), and the real dreaming workflow runs with the plugin's sandbox settings (``lw_temporal``
passed through, as on a worker the plugin configures), not the default's fresh copy of
the package per run.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from lw_temporal import BashRequest, BashResult, RunRecord, WorkflowDefinition
from lw_temporal._config import LwConfig
from lw_temporal._plugin import _passthrough
from lw_temporal.dreaming import DreamInput, DreamOptions, DreamResult, DreamState, DreamStatus
from lw_temporal.dreaming._activities import DreamingActivities
from lw_temporal.dreaming._records import QUERY_STATE
from lw_temporal.dreaming._workflow import DreamingWorkflow
from lw_temporal.memory import MemoryAppendRequest, MemoryStores
from lw_temporal.memory._gate import TaintGate

from .conftest import pydantic_client


def unique_definition(prefix: str) -> str:
    """Tests share one server: a definition id of its own keeps a test's runs apart."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class Step(BaseModel):
    commands: list[str] = []


class Script(BaseModel):
    """What a stand-in planner run does: commands, lessons appended to its workflow
    memory, its steps' commands, and whether it ends in a failure."""

    commands: list[str] = []
    lessons: list[str] = []
    steps: list[Step] = []
    fail: str | None = None


class FakeTools:
    """``lw.bash`` and ``lw.memory.append`` with the result shapes of the real ones:
    ``exit N`` exits N, ``refuse`` is rejected, anything else exits 0."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    @activity.defn(name="lw.bash")
    async def bash(self, request: BashRequest) -> BashResult:
        words = request.command.split()
        if words[:1] == ["exit"]:
            return BashResult(exit_code=int(words[1]), stdout="", stderr="")
        if words[:1] == ["refuse"]:
            return BashResult(
                exit_code=126, stdout="", stderr="", rejection="path is outside the allowed roots"
            )
        return BashResult(exit_code=0, stdout="ok", stderr="")

    @activity.defn(name="lw.memory.append")
    async def append(self, request: MemoryAppendRequest) -> None:
        info = activity.info()
        assert info.workflow_id is not None
        definition = info.workflow_id.split("run_", 1)[1].split("@", 1)[0]
        rel = request.path.removeprefix("/mnt/memory/workflow/")
        target = self.data_dir / "memory" / "workflows" / definition / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a", encoding="utf-8") as handle:
            handle.write(request.content)

    @activity.defn(name="lw.model")
    async def model(self, reason: str) -> None:
        raise ApplicationError(reason, non_retryable=True)


_ONCE = RetryPolicy(maximum_attempts=1)


@workflow.defn(name="lw.Worker", sandboxed=False)
class FakeWorker:
    @workflow.run
    async def run(self, step: Step) -> None:
        for command in step.commands:
            await workflow.execute_activity(
                "lw.bash",
                BashRequest(command=command),
                result_type=BashResult,
                start_to_close_timeout=timedelta(seconds=60),
            )


@workflow.defn(name="lw.Planner", sandboxed=False)
class FakePlanner:
    @workflow.run
    async def run(self, script: Script) -> None:
        for command in script.commands:
            await workflow.execute_activity(
                "lw.bash",
                BashRequest(command=command),
                result_type=BashResult,
                start_to_close_timeout=timedelta(seconds=60),
            )
        for lesson in script.lessons:
            await workflow.execute_activity(
                "lw.memory.append",
                MemoryAppendRequest(
                    path="/mnt/memory/workflow/lessons.md", content=f"- {lesson}\n"
                ),
                start_to_close_timeout=timedelta(seconds=60),
            )
        for n, step in enumerate(script.steps):
            await workflow.execute_child_workflow(
                "lw.Worker", step, id=f"{workflow.info().workflow_id}/steps/step_{n}"
            )
        if script.fail is not None:
            with suppress(ActivityError):
                await workflow.execute_activity(
                    "lw.model",
                    script.fail,
                    start_to_close_timeout=timedelta(seconds=60),
                    retry_policy=_ONCE,
                )


@asynccontextmanager
async def dreaming_worker(
    env: WorkflowEnvironment,
    data_dir: Path,
    task_queue: str,
    definitions: Sequence[str],
    *,
    extra: Sequence[Callable[..., Any]] = (),
    gated: bool = False,
) -> AsyncIterator[Client]:
    """``gated``: the stores have the plugin's taint gate (a worker's, not an admin's)."""
    client = pydantic_client(env)
    config = LwConfig.create(data_dir, [WorkflowDefinition(id=d) for d in definitions])
    stores = MemoryStores.for_config(config)
    if gated:
        stores.gate = TaintGate(config, stores)
    dreaming = DreamingActivities(config, stores=stores)
    tools = FakeTools(data_dir)
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[DreamingWorkflow, FakePlanner, FakeWorker],
        activities=[*dreaming.callables, tools.bash, tools.append, tools.model, *extra],
        workflow_runner=_passthrough(None),
    ):
        yield client


async def run_planners(
    client: Client, task_queue: str, definition: str, scripts: Sequence[Script]
) -> list[str]:
    """Run a stand-in planner per script, and return once visibility lists them all as
    closed, so a dream started next finds them."""
    ids: list[str] = []
    for script in scripts:
        workflow_id = f"run_{definition}@{uuid.uuid4().hex[:10]}"
        await client.execute_workflow("lw.Planner", script, id=workflow_id, task_queue=task_queue)
        ids.append(workflow_id)
    await wait_visible(client, ids)
    return ids


async def start_dream(
    client: Client, task_queue: str, target: str, **options: Any
) -> WorkflowHandle[Any, DreamResult]:
    return await client.start_workflow(
        "lw.Dreaming",
        DreamInput(target=target, options=DreamOptions(**options)),
        id=f"dream_{target}@{uuid.uuid4().hex[:10]}",
        task_queue=task_queue,
        result_type=DreamResult,
    )


async def wait_for_status(handle: WorkflowHandle[Any, Any], *statuses: DreamStatus) -> DreamState:
    async def poll() -> DreamState:
        while True:
            state: DreamState = await handle.query(QUERY_STATE, result_type=DreamState)
            if state.status in statuses:
                return state
            await asyncio.sleep(0.2)

    return await asyncio.wait_for(poll(), 120)


async def wait_visible(client: Client, workflow_ids: Sequence[str]) -> None:
    """Visibility is eventually consistent: wait until every run is listed as closed."""
    wanted = set(workflow_ids)

    async def poll() -> None:
        while True:
            seen = {
                w.id
                async for w in client.list_workflows(
                    "WorkflowType = 'lw.Planner' AND ExecutionStatus = 'Completed'"
                )
            }
            if wanted <= seen:
                return
            await asyncio.sleep(0.2)

    await asyncio.wait_for(poll(), 120)


def read_records(data_dir: Path, dream_id: str) -> list[RunRecord]:
    batches = data_dir / "runs" / dream_id / "scratch" / "dream" / "batches"
    return [
        RunRecord.model_validate_json(line)
        for path in sorted(batches.glob("*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]
