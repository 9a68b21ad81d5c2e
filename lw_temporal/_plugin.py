"""``LittleWorkflowPlugin``: one object that configures a Temporal client and worker.

Passed to ``Client.connect(plugins=[...])`` it sets the pydantic data converter; a
``Worker`` built from that client then registers the lw workflows and the activities
below, each holding the worker-side configuration (data dir, definitions, sandbox,
model) so that nothing of it travels in workflow inputs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.plugin import SimplePlugin
from temporalio.worker import Worker, WorkerConfig, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from ._agent import (
    DEFAULT_CONTEXT_BUDGET,
    ORCHESTRATOR_MAX_TURNS,
    MissingModel,
    Model,
    ModelActivities,
    prefers_local_activity,
)
from ._agent._recorder import ResultRecorder
from ._bash import BashActivities
from ._config import LwConfig
from ._definitions import MemoryQuota, WorkflowDefinition
from ._dreaming import Consolidator, DreamingActivities, DreamingSettings, DreamingWorkflow
from ._memory import MemoryActivities, MemoryStores
from ._memory._capture import bash_committer
from ._retention import RetentionActivities, ScratchRetentionWorkflow
from ._sandbox import Limits
from ._scan import Scanner
from ._telemetry._interceptor import telemetry_interceptors
from ._topology import DEFAULT_HOST_TIMEOUT, host_queue
from ._workflows import WORKFLOWS

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

PLUGIN_NAME = "lw_temporal.LittleWorkflowPlugin"


def _passthrough(runner: WorkflowRunner | None) -> WorkflowRunner:
    """Let workflow code import this package and pydantic without sandbox reloading:
    both are deterministic pure-data modules, and reloading pydantic per workflow is slow."""
    if runner is None:
        runner = SandboxedWorkflowRunner()
    if isinstance(runner, SandboxedWorkflowRunner):
        return dataclasses.replace(
            runner,
            restrictions=runner.restrictions.with_passthrough_modules(
                "lw_temporal", "pydantic", "pydantic_core", "annotated_types"
            ),
        )
    return runner


class LittleWorkflowPlugin(SimplePlugin):
    """Durable, sandboxed agent memory for Temporal workers.

    Args:
        data_dir: where memory stores, run scratch and the library's bookkeeping live.
            Optional when ``memory_root`` and ``runs_root`` are both given.
        definitions: the workflow definitions this worker serves; checked as a set
            (unique ids, attaches that name registered definitions).
        model: what chooses each agent's tool calls (an LLM client or a
            ``ScriptedModel``); worker-side, so no workflow input can pick it. Without
            one, agent workflows fail at their first turn with ``LwModelNotConfigured``.
        search_attributes_registered: set when the server has the Keyword search
            attributes ``LwRole`` and ``LwDefinition``; the workflows then index
            themselves by them (upserting unregistered ones would fail their tasks).
        model_local_activity: call the model as a local activity (no task-queue round
            trip per turn) once a run has learned this setting from its first turn or
            its parent; every worker must then have ``model``. ``None`` (default) asks
            the model: ``ScriptedModel`` says yes, a remote LLM client says nothing
            and gets regular activities (retried and timed out on their own). A
            worker with ``host`` defaults to regular activities on its host queue,
            since a turn may save cleared context to the run's scratch.
        orchestrator_instructions: the orchestrator's system instructions.
        orchestrator_max_turns: the orchestrator's turn budget.
        context_budget_tokens: the most tokens of conversation a model is sent per turn;
            over it, the oldest tool results are replaced by where their output is saved.
        scanner: checks every content written to memory (activities and bash
            capture); defaults to ``DefaultScanner`` (blocks secrets, reports PII).
        store_quota: quota of pipeline, org and dreaming stores (a workflow store
            takes its definition's ``quota``).
        sandbox: how ``lw.bash`` isolates commands: ``"auto"``/``"bwrap"`` (kernel
            namespaces via bubblewrap) or ``"unsandboxed-dangerous"`` (no isolation;
            only for trusted commands). Checked at the first command.
        bash_output_cap: bytes of each output stream returned in an ``lw.bash`` result;
            longer output is saved under the agent's own scratch and referenced.
        bash_limits: rlimits, /tmp size and process limit of each command.
        dreaming_consolidator: writes a dream's notes when the worker has no model;
            defaults to ``DefaultConsolidator`` (deterministic lessons, failures,
            commands). With a model the dreaming agent writes them.
        dreaming: the dreaming agent's instructions (for all targets or per target)
            and turn budget.
        tracing: ``True`` (export by the standard ``OTEL_*`` environment variables) or
            a ``TracerProvider``: adds Temporal's OpenTelemetry interceptor (one trace
            from the client's start through every child) and lw spans for each agent
            run, model turn, command and memory mutation. Needs the ``otel`` extra.
        trace_commands: put each command's text (capped) on its ``lw.bash`` span;
            by default a span holds only the command's sha256.
        memory_root: the memory stores' folder, when apart from ``data_dir``: one
            volume every worker mounts (README, "Several hosts").
        runs_root: the runs' scratch folder, when apart from ``data_dir``: a host's
            own disk in the pinned topology.
        host: this worker's host name; set it on every worker whose runs root is its
            own. The worker then also polls ``<task queue>@<host>``, and each run
            tree started on it runs all its activities there.
        host_timeout: how long a pinned host may take to pick up an activity before
            the run fails as host lost (schedule-to-start timeout of host queues).
        memory_id: refuse to start unless the memory root's id file says this (the
            id every worker of the deployment shares; see ``lw-temporal worker``).
    """

    def __init__(
        self,
        data_dir: str | Path | None = None,
        definitions: Iterable[WorkflowDefinition] = (),
        *,
        model: Model | None = None,
        search_attributes_registered: bool = False,
        model_local_activity: bool | None = None,
        orchestrator_instructions: str = "",
        orchestrator_max_turns: int = ORCHESTRATOR_MAX_TURNS,
        context_budget_tokens: int = DEFAULT_CONTEXT_BUDGET,
        scanner: Scanner | None = None,
        store_quota: MemoryQuota | None = None,
        sandbox: str = "auto",
        bash_output_cap: int = 64 * 1024,
        bash_limits: Limits | None = None,
        dreaming_consolidator: Consolidator | None = None,
        dreaming: DreamingSettings | None = None,
        tracing: bool | TracerProvider = False,
        trace_commands: bool = False,
        memory_root: str | Path | None = None,
        runs_root: str | Path | None = None,
        host: str | None = None,
        host_timeout: timedelta = DEFAULT_HOST_TIMEOUT,
        memory_id: str | None = None,
    ) -> None:
        self.config = LwConfig.create(
            data_dir,
            definitions,
            memory_root=memory_root,
            runs_root=runs_root,
            host=host,
            host_timeout=host_timeout,
            expected_memory_id=memory_id,
        )
        activities: list[Callable[..., object]] = []
        #: The admin API of the memory stores (CLI, dreaming promotion, bash capture).
        self.memory = MemoryStores.for_config(self.config, scanner=scanner, store_quota=store_quota)
        self.memory_activities = MemoryActivities(self.config, self.memory)
        activities += self.memory_activities.callables
        self.bash_activities = BashActivities(
            self.config,
            sandbox=sandbox,
            output_cap=bash_output_cap,
            limits=bash_limits,
            commit_staged=bash_committer(self.memory),
        )
        activities += self.bash_activities.callables
        workflows: list[type] = list(WORKFLOWS)
        self.model_activities = ModelActivities(
            self.config,
            model or MissingModel(),
            index_search_attributes=search_attributes_registered,
            local_activity=(
                # Pinned: a turn may save to scratch, so it goes to the host's queue.
                prefers_local_activity(model) and host is None
                if model_local_activity is None
                else model_local_activity
            ),
            orchestrator_instructions=orchestrator_instructions,
            orchestrator_max_turns=orchestrator_max_turns,
            context_budget_tokens=context_budget_tokens,
            dreaming_instructions=(dreaming or DreamingSettings()).instructions_for,
            dreaming_max_turns=(dreaming or DreamingSettings()).max_turns,
        )
        activities += [self.model_activities.run_turn, self.model_activities.settings]
        self.dreaming_activities = DreamingActivities(
            self.config,
            dreaming_consolidator,
            stores=self.memory,
            agent=model is not None,
            index_search_attributes=search_attributes_registered,
        )
        activities += self.dreaming_activities.callables()
        self.retention_activities = RetentionActivities(self.config)
        activities += self.retention_activities.callables()
        workflows += [DreamingWorkflow, ScratchRetentionWorkflow]
        self.activity_callables: Sequence[Callable[..., object]] = tuple(activities)
        super().__init__(
            PLUGIN_NAME,
            data_converter=pydantic_data_converter,
            activities=list(activities),
            workflows=list(workflows),
            workflow_runner=_passthrough,
            interceptors=[
                ResultRecorder(self.model_activities.conversations.root),
                *telemetry_interceptors(tracing, trace_commands=trace_commands, model=model),
            ],
            # The sandbox fails closed at worker start: its self-test runs first.
            run_context=self.bash_activities.serving,
        )

    @property
    def data_dir(self) -> Path:
        return self.config.layout.root

    # -- several hosts ---------------------------------------------------------------
    def _host_queue_of(self, task_queue: str) -> str | None:
        host = self.config.topology.host
        return None if host is None else host_queue(task_queue, host)

    def _is_host_queue(self, task_queue: str) -> bool:
        host = self.config.topology.host
        return host is not None and task_queue.endswith(f"@{host}")

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        config = super().configure_worker(config)
        if self._is_host_queue(config.get("task_queue", "")):
            # The host queue carries activities only; workflows run anywhere.
            config["workflows"] = []
        return config

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        """Check the roots before polling; a pinned worker also serves its host queue
        (Temporal's worker-specific task queue), for as long as the worker runs."""
        self.config.topology.check_start()
        queue = self._host_queue_of(worker.task_queue)
        if queue is None or self._is_host_queue(worker.task_queue):
            await super().run_worker(worker, next)
            return
        client = worker.client
        plugins: list[LittleWorkflowPlugin] = (
            [] if self in client.config().get("plugins", []) else [self]
        )
        host_worker = Worker(client, task_queue=queue, plugins=plugins)
        async with host_worker:
            await super().run_worker(worker, next)
