"""``LittleWorkflowPlugin``: one object that configures a Temporal client and worker.

Passed to ``Client.connect(plugins=[...])`` it sets the pydantic data converter; a
``Worker`` built from that client then registers the lw workflows and the activities
below, each holding the worker-side configuration (data dir, definitions, sandbox,
model) so that nothing of it travels in workflow inputs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.plugin import SimplePlugin
from temporalio.worker import Worker, WorkerConfig, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from ._agent import Bounds, MissingModel, Model, ModelActivities, prefers_local_activity
from ._agent._recorder import ResultRecorder
from ._approvals._audit import ApprovalActivities
from ._bash import BashActivities
from ._config import LwConfig
from ._definitions import WorkflowDefinition
from ._edit import EditActivities
from ._placement import PlacementInterceptor
from ._privacy import EncryptionCodec, FileKeyStore, KeyRing, default_key_store, with_codec
from ._privacy._registry import register
from ._telemetry._setup import telemetry_interceptors
from ._topology import host_queue
from ._vouch import VouchInterceptor
from ._workflows import WORKFLOWS
from .dreaming._activities import DreamingActivities
from .dreaming._workflow import DreamingWorkflow
from .memory._activities import MemoryActivities
from .memory._capture import audit_mark, bash_committer
from .memory._gate import TaintGate
from .memory._retention import RetentionActivities, ScratchRetentionWorkflow
from .memory._stores import MemoryStores
from .options._groups import (
    BashOptions,
    DeploymentOptions,
    DreamingAgentOptions,
    EgressOptions,
    MemoryOptions,
    ModelCallOptions,
    OrchestratorOptions,
    PrivacyOptions,
)

#: How often a running activity's heartbeat details reach the server at most (the live
#: tree shows a command's newest output from them).
LIVE_HEARTBEAT_EVERY = timedelta(seconds=2)

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
                "lw_temporal",
                "pydantic",
                "pydantic_core",
                "annotated_types",
                # Approval rules match agent-written commands in workflow code with RE2.
                "re2",
            ),
        )
    return runner


def _check_model(model: object) -> None:
    """A model must be one: a factory or a class given for what it makes
    (``model=sample_model``) would only fail at the first turn, and again per retry."""
    if model is None or (isinstance(model, Model) and not isinstance(model, type)):
        return
    name = getattr(model, "__qualname__", None)
    if callable(model) and name:
        kind, arguments = ("class", "(...)") if isinstance(model, type) else ("function", "()")
        what = f"the {kind} {name} (call it: model={name}{arguments})"
    else:
        kind = type(model).__name__
        what = f"{'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind}"
        if isinstance(model, str):
            what += " (lw_temporal.models.model_from_spec builds one from 'provider:model')"
    raise TypeError(
        f"model= takes a Model, an object with async next_turn(request) such as "
        f"AnthropicModel(...) or ScriptedModel(scripts), not {what}"
    )


def _check_policies(config: LwConfig, memory: MemoryOptions) -> None:
    """Every release policy a definition names must be given, or a definition that
    meant to be released by code would wait for a person forever, silently."""
    for definition in config.definitions.values():
        name = definition.memory.release_policy
        if name is not None and name not in memory.quarantine_policies:
            known = sorted(memory.quarantine_policies) or "none"
            raise ValueError(
                f"definition {definition.id!r} names the quarantine release policy {name!r}, "
                f"which this worker does not have (MemoryOptions(quarantine_policies=...) "
                f"gives: {known})"
            )


class LittleWorkflowPlugin(SimplePlugin):
    """Durable, sandboxed agent memory for Temporal workers.

    Settings come in a few groups (``lw_temporal.options``), one per part of the worker
    that reads them, as Temporal's ``openai_agents`` plugin takes its model activity's
    settings as one ``ModelActivityParameters``; a group left out keeps its defaults.

    Args:
        data_dir: where memory stores, run scratch and the library's bookkeeping live.
            Optional when ``deployment`` gives both ``memory_root`` and ``runs_root``.
        definitions: the workflow definitions this worker serves; checked as a set
            (unique ids, attaches that name registered definitions).
        model: what chooses each agent's tool calls (an LLM client or a
            ``ScriptedModel``); worker-side, so no workflow input can pick it. Without
            one, agent workflows fail at their first turn with ``LwModelNotConfigured``.
        sandbox: how ``lw.bash`` isolates commands: ``"auto"``, ``"bwrap"`` (kernel
            namespaces via bubblewrap), ``"landlock"``, or ``"unsandboxed-dangerous"``
            (no isolation; only for trusted commands). Checked at worker start.
        tracing: ``True`` (export by the standard ``OTEL_*`` environment variables) or
            a ``TracerProvider``: adds Temporal's OpenTelemetry interceptor (one trace
            from the client's start through every child) and lw spans for each agent
            run, model turn, command and memory mutation. Needs the ``otel`` extra.
        model_calls: how ``lw.model`` is called (local activity or not) and the
            context budget of each call.
        orchestrator: the orchestrator's instructions and turn budget.
        bash: output cap, resource limits and span contents of each command.
        memory: the scanner and the shared stores' quota every memory write passes,
            and the embedder that lets agents' searches rank by meaning.
        dreaming: the dreaming agent's instructions, turn budget and model-free
            consolidator.
        deployment: memory and runs roots, host, host timeout, memory id and whether
            the server has lw's search attributes.
        privacy: payload encryption per run tree (on by default) and its key store.
        egress: the egress proxy's limits per command (agents whose definition has a
            ``NetworkPolicy``) and, for tests only, a resolver override.
    """

    def __init__(
        self,
        data_dir: str | Path | None = None,
        definitions: Iterable[WorkflowDefinition] = (),
        *,
        model: Model | None = None,
        sandbox: str = "auto",
        tracing: bool | TracerProvider = False,
        model_calls: ModelCallOptions | None = None,
        orchestrator: OrchestratorOptions | None = None,
        bash: BashOptions | None = None,
        memory: MemoryOptions | None = None,
        dreaming: DreamingAgentOptions | None = None,
        deployment: DeploymentOptions | None = None,
        privacy: PrivacyOptions | None = None,
        egress: EgressOptions | None = None,
    ) -> None:
        _check_model(model)
        model_calls = model_calls or ModelCallOptions()
        orchestrator = orchestrator or OrchestratorOptions()
        bash = bash or BashOptions()
        memory = memory or MemoryOptions()
        dreaming = dreaming or DreamingAgentOptions()
        deployment = deployment or DeploymentOptions()
        privacy = privacy or PrivacyOptions()
        self.config = LwConfig.create(
            data_dir,
            definitions,
            memory_root=deployment.memory_root,
            runs_root=deployment.runs_root,
            host=deployment.host,
            host_timeout=deployment.host_timeout,
            expected_memory_id=deployment.memory_id,
        )
        #: The payload codec every client and worker built with this plugin seals with
        #: (``None`` when ``PrivacyOptions(encrypt=False)``).
        self.codec: EncryptionCodec | None = None
        if privacy.encrypt:
            store = privacy.key_store or default_key_store(self.config.layout)
            self.codec = EncryptionCodec(KeyRing(store, ttl=privacy.key_cache_seconds))
        activities: list[Callable[..., object]] = []
        #: The admin API of the memory stores (CLI, dreaming promotion, bash capture).
        self.memory = MemoryStores.for_config(
            self.config, scanner=memory.scanner, store_quota=memory.store_quota
        )
        _check_policies(self.config, memory)
        #: Taint: a tainted run's shared writes are held, its reads checked (the gate
        #: consults the worker's taint book, never an activity's input).
        self.memory.gate = TaintGate(self.config, self.memory, memory.quarantine_policies)
        self.memory_activities = MemoryActivities(
            self.config, self.memory, embedder=memory.embedder
        )
        activities += self.memory_activities.callables
        self.bash_activities = BashActivities(
            self.config,
            sandbox=sandbox,
            output_cap=bash.output_cap,
            limits=bash.limits,
            commit_staged=bash_committer(self.memory),
            commit_mark=audit_mark(self.memory),
            sandbox_ids=bash.sandbox_ids,
            egress=(egress or EgressOptions()).limits(),
            taint=self.memory.gate,
        )
        activities += self.bash_activities.callables
        #: Claude's text editor and memory tool over the same stores, each agent's
        #: scratch written as the uid its commands run as.
        self.edit_activities = EditActivities(self.memory_activities, self.bash_activities.user_of)
        activities += self.edit_activities.callables
        workflows: list[type] = list(WORKFLOWS)
        local_activity = model_calls.local_activity
        if local_activity is None:
            # Pinned: a turn may save to scratch, so it goes to the host's queue.
            local_activity = prefers_local_activity(model) and deployment.host is None
        self.model_activities = ModelActivities(
            self.config,
            model or MissingModel(),
            index_search_attributes=deployment.search_attributes_registered,
            local_activity=local_activity,
            orchestrator_instructions=orchestrator.instructions,
            orchestrator_max_turns=orchestrator.max_turns,
            orchestrator_bounds=Bounds(
                children_per_turn=orchestrator.max_children_per_turn,
                children=orchestrator.max_children,
                tree_turns=orchestrator.max_tree_turns,
            ),
            context_budget_tokens=model_calls.context_budget_tokens,
            dreaming_instructions=dreaming.instructions_for,
            dreaming_max_turns=dreaming.max_turns,
            taint=self.memory.gate.book,
        )
        activities += self.model_activities.callables
        self.dreaming_activities = DreamingActivities(
            self.config,
            dreaming.consolidator,
            stores=self.memory,
            agent=model is not None,
            index_search_attributes=deployment.search_attributes_registered,
        )
        activities += self.dreaming_activities.callables
        self.retention_activities = RetentionActivities(self.config)
        activities += self.retention_activities.callables
        self.approval_activities = ApprovalActivities(self.config)
        activities += self.approval_activities.callables
        workflows += [DreamingWorkflow, ScratchRetentionWorkflow]
        self.activity_callables: Sequence[Callable[..., object]] = tuple(activities)
        super().__init__(
            PLUGIN_NAME,
            data_converter=with_codec(pydantic_data_converter, self.codec),
            activities=list(activities),
            workflows=list(workflows),
            workflow_runner=_passthrough,
            interceptors=[
                ResultRecorder(self.model_activities.conversations.root),
                PlacementInterceptor(),
                VouchInterceptor(self.config.callers.vouch_key),
                *telemetry_interceptors(tracing, trace_commands=bash.trace_commands, model=model),
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
        client = config.get("client")
        if client is not None:
            self._register_keys(client, config.get("task_queue", ""))
        # A running command's newest output reaches the live tree through its heartbeat
        # details, which the SDK sends at most this often.
        throttle = config.get("max_heartbeat_throttle_interval") or LIVE_HEARTBEAT_EVERY
        config["max_heartbeat_throttle_interval"] = min(throttle, LIVE_HEARTBEAT_EVERY)
        if self._is_host_queue(config.get("task_queue", "")):
            # The host queue carries activities only; workflows run anywhere.
            config["workflows"] = []
        return config

    def _register_keys(self, client: Client, task_queue: str) -> None:
        """Say on this host which key store serves the worker's namespace, so a
        ``lw-temporal`` command run here by a user who can read the keys finds them
        (:mod:`._privacy._registry`); done as the worker is built, so before it says
        it is ready; a problem is a warning, never a failed start."""
        store = None if self.codec is None else self.codec.ring.store
        if not isinstance(store, FileKeyStore) or self._is_host_queue(task_queue):
            return
        target = client.service_client.config.target_host
        for problem in register(target, client.namespace, task_queue, store):
            logging.getLogger(__name__).warning(
                "lw-temporal commands on this host will not find this worker's keys: %s",
                problem,
            )

    async def _load_vouch_key(self) -> None:
        """The key this worker's workflows stamp their activities with (``_vouch``);
        without it (a read-only data dir), activities describe their callers instead."""
        if not self.config.callers.enabled:
            return
        try:
            await asyncio.to_thread(self.config.callers.vouch_key.load)
        except OSError as err:
            logging.getLogger(__name__).warning(
                "lw: no caller key (%s); activities confirm each calling run with the "
                "server instead, which costs a describe per run",
                err,
            )

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        """Check the roots before polling; a pinned worker also serves its host queue
        (Temporal's worker-specific task queue), for as long as the worker runs."""
        self.config.topology.check_start()
        # Workflows on this queue are this deployment's: its activities may serve them.
        self.config.callers.serve(worker.task_queue)
        await self._load_vouch_key()
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
