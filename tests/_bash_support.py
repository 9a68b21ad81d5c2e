"""Run ``lw.bash`` as any role on a real Temporal server.

The test workflows carry the real workflow type names (``lw.Worker`` ...), because
the activity derives its scope from ``activity.info().workflow_type`` and ``workflow_id``;
they only execute ``lw.bash`` for each command they are given, in one open run per ID
started under its ancestors' runs (``_session_support``). The worker registers them with
the plugin's activities but without the plugin's own workflows.

They run outside the workflow sandbox (as the memory stand-ins do): the SDK builds each
new run's sandbox on the worker's event loop, and this module's imports (pytest, the
conftest's tracing, a fresh copy of most of ``lw_temporal``) took about a second of it
per run, so a test starting dozens of agents at once stalled every activity and workflow
task of the worker past the server's 10 s workflow-task timeout.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from lw_temporal import BashRequest, BashResult, LittleWorkflowPlugin
from lw_temporal._sandbox import landlock_abi, staging_root
from lw_temporal._scope import Scope
from tests._session_support import Sessions, StandIn
from tests.conftest import pydantic_client


@dataclass
class Commands:
    commands: list[str]
    timeout_seconds: float | None = None
    activity_timeout_seconds: float = 120.0
    heartbeat_timeout_seconds: float = 30.0
    #: Run them all at once (as a model's parallel tool calls do), not one by one.
    parallel: bool = False


async def _run_all(commands: Commands) -> list[BashResult]:
    def one(command: str) -> Awaitable[BashResult]:
        return workflow.execute_activity(
            "lw.bash",
            BashRequest(command=command, timeout_seconds=commands.timeout_seconds),
            result_type=BashResult,
            start_to_close_timeout=timedelta(seconds=commands.activity_timeout_seconds),
            heartbeat_timeout=timedelta(seconds=commands.heartbeat_timeout_seconds),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )

    if commands.parallel:
        return list(await asyncio.gather(*(one(c) for c in commands.commands)))
    return [await one(command) for command in commands.commands]


RUN_COMMANDS = "commands"


class _BashStandIn(StandIn):
    @workflow.update(name=RUN_COMMANDS)
    async def commands(self, commands: Commands) -> list[BashResult]:
        return await self.calling(_run_all(commands))


@workflow.defn(name="lw.Orchestrator", sandboxed=False)
class BashOrchestrator(_BashStandIn):
    @workflow.run
    async def run(self) -> None:
        await self.wait()


@workflow.defn(name="lw.Planner", sandboxed=False)
class BashPlanner(_BashStandIn):
    @workflow.run
    async def run(self) -> None:
        await self.wait()


@workflow.defn(name="lw.Worker", sandboxed=False)
class BashWorker(_BashStandIn):
    @workflow.run
    async def run(self) -> None:
        await self.wait()


TEST_WORKFLOWS = [BashOrchestrator, BashPlanner, BashWorker]


class BashRunner:
    def __init__(self, client: Client, task_queue: str) -> None:
        self.client = client
        self.task_queue = task_queue
        self.sessions = Sessions(client, task_queue)

    async def run(
        self,
        workflow_id: str,
        commands: Sequence[str],
        *,
        timeout_seconds: float | None = None,
        heartbeat_timeout_seconds: float = 30.0,
        parallel: bool = False,
    ) -> list[BashResult]:
        """Run ``commands`` in order (or all at once) as the agent ``workflow_id`` (its
        role follows from the ID), in the one run of that ID this runner keeps open
        (started under its ancestors' runs, as lw starts it)."""
        result: list[BashResult] = await self.sessions.call(
            workflow_id,
            RUN_COMMANDS,
            Commands(
                list(commands),
                timeout_seconds,
                heartbeat_timeout_seconds=heartbeat_timeout_seconds,
                parallel=parallel,
            ),
            list[BashResult],
        )
        return result

    async def one(
        self, workflow_id: str, command: str, *, timeout_seconds: float | None = None
    ) -> BashResult:
        return (await self.run(workflow_id, [command], timeout_seconds=timeout_seconds))[0]


@asynccontextmanager
async def bash_worker(
    env: WorkflowEnvironment, plugin: LittleWorkflowPlugin, task_queue: str | None = None
) -> AsyncIterator[BashRunner]:
    client = pydantic_client(env)
    queue = task_queue or f"bash-{uuid.uuid4().hex[:10]}"
    async with Worker(
        client,
        task_queue=queue,
        workflows=TEST_WORKFLOWS,
        activities=list(plugin.activity_callables),
    ):
        runner = BashRunner(client, queue)
        try:
            yield runner
        finally:
            await runner.sessions.close()


# -- snapshots -------------------------------------------------------------------------


def staging_folder(plugin: LittleWorkflowPlugin) -> Path:
    """Where ``plugin``'s worker keeps its overlay staging sets (``/dev/shm`` when it
    can, else under ``.lw/``)."""
    bash = plugin.bash_activities
    return staging_root(plugin.config.layout.local_state / "staging", bash.user, bash.claim().owner)


def data_snapshot(scope: Scope) -> dict[str, tuple[object, ...]]:
    """The data dir as a command of ``scope``'s agent must leave it: all of it but the
    agent's own scratch and the worker's bookkeeping under ``.lw/`` (staging, locks,
    run manifests and markers), the stores' own records (``.lw/stores``) included."""
    state = scope.layout.state
    stores = {f".lw/stores/{k}": v for k, v in snapshot(state / "stores").items()}
    return {**snapshot(scope.layout.root, skip=[scope.own_scratch, state]), **stores}


def snapshot(root: Path, *, skip: Sequence[Path] = ()) -> dict[str, tuple[object, ...]]:
    """Every entry under ``root`` (type, mode, size, content hash or link target),
    leaving out the ``skip`` folders (the writable roots)."""
    skipped = {os.path.realpath(p) for p in skip}
    state: dict[str, tuple[object, ...]] = {}
    for folder, dirs, files in os.walk(root):
        if os.path.realpath(folder) in skipped:
            dirs[:] = []
            continue
        dirs[:] = [d for d in dirs if os.path.realpath(os.path.join(folder, d)) not in skipped]
        for name in sorted(dirs + files):
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            if os.path.islink(path):
                state[rel] = ("link", os.readlink(path))
            elif os.path.isfile(path):
                digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
                state[rel] = ("file", st.st_mode, st.st_size, digest)
            else:
                state[rel] = ("other", st.st_mode)
    return state


# -- backends --------------------------------------------------------------------------


#: Both kernel sandboxes, for tests that must hold on each (skipped where one is missing).
SANDBOXES = [
    pytest.param(
        "bwrap", marks=pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bwrap")
    ),
    pytest.param(
        "landlock", marks=pytest.mark.skipif(landlock_abi() < 6, reason="needs Landlock ABI 6+")
    ),
]


def saved_file(scratch: Path, ref: str | None) -> Path:
    """Where a result's ``stdout_ref``/``stderr_ref`` (a path of the agent's view)
    is on the host, given the agent's own scratch."""
    assert ref is not None and ref.startswith("/mnt/scratch/own/"), ref
    return scratch / ref.removeprefix("/mnt/scratch/own/")
