"""Stand-ins for the several-hosts tests: a planner (registered as ``lw.Planner``)
that writes its plan on one host and starts a real ``lw.Worker`` step pinned to
whichever host queue the test names, and workers standing for hosts in one process."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel
from temporalio import workflow
from temporalio.client import Client
from temporalio.exceptions import ApplicationError, ChildWorkflowError
from temporalio.worker import Worker

from lw_temporal import AgentInput, AgentResult, LittleWorkflowPlugin, Role
from lw_temporal._agent._io import WorkerSettings
from lw_temporal._plugin import _passthrough
from lw_temporal._topology import HostPin, host_queue
from lw_temporal._workflows import Worker as StepWorkflow
from lw_temporal.ids import DataLayout, pipeline_key
from lw_temporal.options import DeploymentOptions
from lw_temporal.testing import ScriptedModel, tool
from workflows.pipeline import DEFINITIONS


def planner_id(task_queue: str) -> str:
    return f"run_candidate-review@{task_queue}"


def step_id(task_queue: str) -> str:
    return f"{planner_id(task_queue)}/steps/step_1"


GO_SIGNAL = "go"

STEP_MODEL = ScriptedModel(
    {
        ("candidate-review", Role.WORKER): [
            [tool("bash", command="cat /mnt/scratch/from-planner/plan.md")],
            [tool("finish", summary="read the plan")],
        ]
    }
)


class Forcing(BaseModel):
    """Where the stand-in planner works and where it pins its step."""

    planner_queue: str
    step_pin: HostPin
    wait_for_go: bool = False


@workflow.defn(name="lw.Planner", sandboxed=False)
class ForcingPlanner:
    def __init__(self) -> None:
        self._go = False

    @workflow.signal(name=GO_SIGNAL)
    def go(self) -> None:
        self._go = True

    @workflow.run
    async def run(self, forcing: Forcing) -> str:
        await workflow.execute_activity(
            "lw.bash",
            {"command": "echo 'the plan' > /mnt/scratch/own/plan.md"},
            result_type=dict,
            task_queue=forcing.planner_queue,
            start_to_close_timeout=timedelta(seconds=60),
        )
        if forcing.wait_for_go:
            await workflow.wait_condition(lambda: self._go)
        try:
            result = await workflow.execute_child_workflow(
                "lw.Worker",
                AgentInput(task="read the plan", settings=WorkerSettings(pin=forcing.step_pin)),
                id=f"{workflow.info().workflow_id}/steps/step_1",
                result_type=AgentResult,
            )
        except ChildWorkflowError as err:
            cause: BaseException | None = err
            while cause is not None and not isinstance(cause, ApplicationError):
                cause = cause.__cause__
            assert cause is not None, repr(err)
            return f"failed: {cause.type}: {cause.message}"
        return f"finished: {result.summary}"


@dataclass
class Host:
    """One host: its plugin (own runs root, the shared memory root) and queue."""

    name: str
    plugin: LittleWorkflowPlugin
    queue: str

    def pin(self, host_timeout: float = 60) -> HostPin:
        return HostPin(
            task_queue=self.queue,
            host=self.name,
            host_timeout_seconds=host_timeout,
        )


def make_host(name: str, memory_root: Path, runs_root: Path, task_queue: str) -> Host:
    plugin = LittleWorkflowPlugin(
        definitions=DEFINITIONS,
        model=STEP_MODEL,
        deployment=DeploymentOptions(memory_root=memory_root, runs_root=runs_root, host=name),
    )
    return Host(name, plugin, host_queue(task_queue, name))


def two_hosts(tmp_path: Path, task_queue: str) -> tuple[Host, Host]:
    """Hosts ``a`` and ``b``: one shared memory root, a runs root each."""
    memory = tmp_path / "memory"
    return (
        make_host("a", memory, tmp_path / "runs-a", task_queue),
        make_host("b", memory, tmp_path / "runs-b", task_queue),
    )


@asynccontextmanager
async def workflow_worker(client: Client, task_queue: str, host: Host) -> AsyncIterator[None]:
    """The stand-in planner and the real step workflow on the shared queue (the
    step's model, a scratch-free local activity, runs here)."""
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[ForcingPlanner, StepWorkflow],
        activities=list(host.plugin.activity_callables),
        workflow_runner=_passthrough(None),
    ):
        yield


@asynccontextmanager
async def host_workers(client: Client, *hosts: Host) -> AsyncIterator[dict[str, Worker]]:
    """Each host's own task queue, polled by a worker holding that host's activities."""
    async with AsyncExitStack() as stack:
        workers = {}
        for host in hosts:
            worker = Worker(
                client, task_queue=host.queue, activities=list(host.plugin.activity_callables)
            )
            workers[host.name] = await stack.enter_async_context(worker)
        yield workers


REVIEW = "sub-runs/run_candidate-review@1"
SCORING = "sub-runs/run_candidate-scoring@2"
#: Every run of one sample pipeline, relative to the pipeline's folder.
PIPELINE_RUNS = (
    ".",
    REVIEW,
    *(f"{REVIEW}/steps/step_{n}" for n in (1, 2, 3)),
    SCORING,
    *(f"{SCORING}/steps/step_{n}" for n in (1, 2)),
)


def assert_pipeline_whole(runs: Path, pipeline: str) -> None:
    """Every step of the sample pipeline wrote its findings from what it read through
    its mounts (the planner's plan, the orchestrator's brief)."""
    tree = runs / pipeline
    for step, task in ((1, "resume"), (2, "gap-analysis"), (3, "references")):
        findings = (tree / REVIEW / f"steps/step_{step}/scratch/findings.md").read_text()
        assert findings.splitlines()[0] == f"# {task}"
        assert findings.splitlines()[-1].startswith("Candidate: Dana Reyes")
    for step in (1, 2):
        score = (tree / SCORING / f"steps/step_{step}/scratch/score.md").read_text()
        assert score.count("4/5") == 1


def assert_memory_written_once(layout: DataLayout, pipelines: list[str]) -> None:
    """Each pipeline's lessons and history lines are in memory once, and every audited
    change is one activity's one change (no write applied twice)."""
    lessons = (layout.workflow_memory("candidate-review") / "lessons-learned.md").read_text()
    history = (layout.pipeline_memory(pipeline_key(DEFINITIONS)) / "history.md").read_text()
    for pipeline in pipelines:
        assert lessons.count(f"## {pipeline}/{REVIEW}\n") == 1
        assert history.count(f"- {pipeline}:") == 1
    audit: Counter[tuple[str, str, str]] = Counter()
    for log in layout.state.rglob("audit.jsonl"):
        for line in log.read_text().splitlines():
            entry = json.loads(line)
            audit[(entry["workflow_id"], entry["activity_id"], entry["path"])] += 1
    assert audit and set(audit.values()) == {1}
    assert {w for w, _, _ in audit} >= {f"{p}/{REVIEW}" for p in pipelines}
