"""The plugin's option groups: one object per concern, as Temporal's ``openai_agents``
contrib groups the model activity's settings in ``ModelActivityParameters``.

Each group is read by one part of the worker (``lw.model``, the orchestrator, ``lw.bash``,
the memory stores, the dreaming agent, the deployment's roots and hosts), so a reader of
``LittleWorkflowPlugin(...)`` sees which part a setting changes, and a new setting has one
obvious home. Every field defaults to the behaviour of a plugin built without it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from .._agent import DEFAULT_CONTEXT_BUDGET, ORCHESTRATOR_MAX_TREE_TURNS, ORCHESTRATOR_MAX_TURNS
from .._definitions import MAX_CHILDREN, MAX_CHILDREN_PER_TURN, MemoryQuota
from .._egress import ProxyLimits
from .._egress._patterns import PatternError, normalise_name
from .._privacy import KeyStore
from .._sandbox import Limits
from .._sandbox._idrange import check_ids
from .._scan import Scanner
from .._topology import DEFAULT_HOST_TIMEOUT
from ..dreaming._consolidator import Consolidator
from ..dreaming._prompt import DEFAULT_INSTRUCTIONS
from ..memory._quarantine import QuarantinePolicy
from ..memory._search import Embedder

#: Bytes of each output stream an ``lw.bash`` result carries by default.
DEFAULT_OUTPUT_CAP = 64 * 1024


def _positive(group: str, name: str, value: int) -> None:
    if value <= 0:
        raise ValueError(f"{group}({name}={value!r}): {name} must be a positive integer")


@dataclass(frozen=True, kw_only=True)
class ModelCallOptions:
    """How workflow code calls ``lw.model`` and how much conversation each call sends.

    Apart from the model itself (the plugin's ``model=``) because these are Temporal
    and budget choices the same for any model, as ``ModelActivityParameters`` is.
    """

    #: Call the model as a local activity (no task-queue round trip per turn); every
    #: worker must then have the model. ``None`` asks the model: ``ScriptedModel`` says
    #: yes, a remote LLM client says nothing and gets regular activities (retried and
    #: timed out on their own). A worker with a ``host`` defaults to regular activities
    #: on its host queue, since a turn may save cleared context to the run's scratch.
    #: A run tree learns this once, from its root's worker, and its children inherit it.
    local_activity: bool | None = None
    #: The most tokens of conversation a model is sent per turn; over it, the oldest
    #: tool results are replaced by where their output is saved.
    context_budget_tokens: int = DEFAULT_CONTEXT_BUDGET

    def __post_init__(self) -> None:
        _positive("ModelCallOptions", "context_budget_tokens", self.context_budget_tokens)


@dataclass(frozen=True, kw_only=True)
class OrchestratorOptions:
    """What the orchestrator is told and how many turns it gets.

    The orchestrator has no ``WorkflowDefinition`` (it runs the pipeline of the
    definitions), so these fields are its definition, set per worker.
    """

    #: Its system instructions; empty uses the built-in pipeline instructions.
    instructions: str = ""
    #: Its turn budget (planners and workers take theirs from their definition).
    max_turns: int = ORCHESTRATOR_MAX_TURNS
    #: Planner sub-runs it starts per turn and per run, and the turns its whole
    #: pipeline may take (each planner's tree also within its definition's bound).
    max_children_per_turn: int = MAX_CHILDREN_PER_TURN
    max_children: int = MAX_CHILDREN
    max_tree_turns: int = ORCHESTRATOR_MAX_TREE_TURNS

    def __post_init__(self) -> None:
        for name in ("max_turns", "max_children_per_turn", "max_children", "max_tree_turns"):
            _positive("OrchestratorOptions", name, getattr(self, name))


@dataclass(frozen=True, kw_only=True)
class BashOptions:
    """What an ``lw.bash`` command may use and what its result and span hold.

    How commands are isolated is the plugin's own ``sandbox=`` keyword; these are the
    bounds inside that isolation, the same for every backend.
    """

    #: Bytes of each output stream returned in a result; longer output is saved under
    #: the agent's own scratch and referenced.
    output_cap: int = DEFAULT_OUTPUT_CAP
    #: Rlimits, ``/tmp`` size and process limit of each command (``None``: ``Limits()``).
    limits: Limits | None = None
    #: Put each command's text (capped, secret-looking parts removed) on its
    #: ``lw.bash`` span; by default a span holds only the command's sha256.
    trace_commands: bool = False
    #: The host ids a root worker gives agents: each agent (workflow ID) runs as a uid
    #: and gid of its own from this range, leased while it runs commands; the first id
    #: is the group all agents share, the lower half of the others go to agents, the
    #: upper half to memory stores' groups. ``None``: 16,384 ids from ``0x70000000``.
    #: Every worker of one data dir must use the same range (its memory root's and
    #: runs roots' lease tables record it); pick ids no account or container uses.
    sandbox_ids: range | None = None

    def __post_init__(self) -> None:
        _positive("BashOptions", "output_cap", self.output_cap)
        if self.sandbox_ids is not None:
            check_ids(self.sandbox_ids)


@dataclass(frozen=True, kw_only=True)
class MemoryOptions:
    """What every write to memory must pass, whoever makes it (memory activities, bash
    capture, dreaming promotion, the admin API), and how agents' searches rank."""

    #: Checks every content written; ``None`` uses ``DefaultScanner`` (blocks secrets,
    #: reports PII).
    scanner: Scanner | None = None
    #: Quota of pipeline, org and dreaming stores (a workflow store takes its
    #: definition's ``quota``); ``None`` uses ``MemoryQuota()``.
    store_quota: MemoryQuota | None = None
    #: Makes ``memory_search`` rank by meaning as well as by words (e.g.
    #: ``lw_temporal.models.OpenAIEmbedder``); ``None`` ranks by words only.
    embedder: Embedder | None = None
    #: Release policies by name, for definitions naming one in
    #: ``MemoryConfig(release_policy=...)``: each decides on a tainted run's held
    #: changes as they are held (``lw_temporal.memory.QuarantinePolicy``).
    quarantine_policies: Mapping[str, QuarantinePolicy] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class DreamingAgentOptions:
    """What the dreaming agent is told, how long it may take, and who writes a dream's
    notes on a worker without a model.

    Worker-side, apart from ``DreamOptions`` (what one scheduled dream reads), so that
    no schedule or client can change the dreaming agent's instructions.
    """

    #: Its system instructions; ``{target}`` is replaced by the definition whose runs
    #: are consolidated.
    instructions: str = DEFAULT_INSTRUCTIONS
    #: Instructions for one target definition, instead of ``instructions``.
    per_target: Mapping[str, str] = field(default_factory=dict)
    #: Its turn budget.
    max_turns: int = ORCHESTRATOR_MAX_TURNS
    #: Writes the notes when the worker has no model; ``None`` uses
    #: ``DefaultConsolidator`` (deterministic lessons, failures, commands).
    consolidator: Consolidator | None = None

    def __post_init__(self) -> None:
        _positive("DreamingAgentOptions", "max_turns", self.max_turns)

    def instructions_for(self, target: str) -> str:
        """The instructions of the dream of ``target``, with ``{target}`` filled in."""
        return self.per_target.get(target, self.instructions).replace("{target}", target)


@dataclass(frozen=True, kw_only=True)
class EgressOptions:
    """The worker's egress proxy: what one command may use of the network, and (for
    tests only) names it resolves without DNS.

    Read by the proxy for every command whose agent has a network policy
    (``WorkflowDefinition(network=NetworkPolicy(...))``); a worker without such
    agents never starts the proxy.
    """

    #: Test stand-ins: ``{name: address}`` answered instead of a DNS lookup. A name
    #: mapped to a loopback address is the only way the proxy connects to loopback;
    #: every other refused address stays refused. Never set this in production.
    resolve: Mapping[str, str] = field(default_factory=dict)
    #: Connections (attempts, refused ones included) one command may make.
    max_connections: int = 256
    #: Bytes one command may move both ways together.
    max_bytes: int = 1 << 30
    #: How long one connection may stay open.
    max_connection_seconds: float = 600.0

    def __post_init__(self) -> None:
        _positive("EgressOptions", "max_connections", self.max_connections)
        _positive("EgressOptions", "max_bytes", self.max_bytes)
        if self.max_connection_seconds <= 0:
            raise ValueError("EgressOptions(max_connection_seconds=...) must be positive")
        resolved: dict[str, str] = {}
        for name, address in self.resolve.items():
            try:
                key = normalise_name(name)
                value = str(ipaddress.ip_address(address))
            except (PatternError, ValueError) as err:
                raise ValueError(
                    f"EgressOptions(resolve={{{name!r}: {address!r}}}): {err}"
                ) from None
            resolved[key] = value
        object.__setattr__(self, "resolve", resolved)

    def limits(self) -> ProxyLimits:
        return ProxyLimits(
            max_connections=self.max_connections,
            max_bytes=self.max_bytes,
            max_connection_seconds=self.max_connection_seconds,
            resolve=dict(self.resolve),
        )


@dataclass(frozen=True, kw_only=True)
class DeploymentOptions:
    """Where this worker's memory and runs live, which host it is, and what the
    Temporal server offers: the facts that must agree across every worker of one
    deployment (README, "Several hosts"), set in one place."""

    #: The memory stores' folder, when apart from ``data_dir``: one volume every
    #: worker mounts.
    memory_root: str | Path | None = None
    #: The runs' scratch folder, when apart from ``data_dir``: a host's own disk in
    #: the pinned topology.
    runs_root: str | Path | None = None
    #: This worker's host name; set it on every worker whose runs root is its own. The
    #: worker then also polls ``<task queue>@<host>``, and each run tree started on it
    #: runs all its activities there.
    host: str | None = None
    #: How long a pinned host may take to pick up an activity before the run fails as
    #: host lost (schedule-to-start timeout of host queues).
    host_timeout: timedelta = DEFAULT_HOST_TIMEOUT
    #: Refuse to start unless the memory root's id file says this (the id every worker
    #: of the deployment shares; see ``lw-temporal worker``).
    memory_id: str | None = None
    #: The server has the Keyword search attributes ``LwRole`` and ``LwDefinition``;
    #: the workflows then index themselves by them (upserting unregistered ones would
    #: fail their tasks) and dreaming finds runs by them.
    search_attributes_registered: bool = False


@dataclass(frozen=True, kw_only=True)
class PrivacyOptions:
    """How lw's workflow and activity payloads are kept from whoever reads Temporal's
    histories (its database, archives, exports, the UI): sealed per run tree, so that
    ``lw-temporal forget`` makes a tree's payloads unreadable wherever they were copied.

    On by default; ``encrypt=False`` is the explicit choice to store them readable.
    Every worker, client and codec server of a deployment must share one key store.
    """

    #: Seal every payload (AES-256-GCM) with its run tree's key.
    encrypt: bool = True
    #: Where the keys live; ``None``: one file per tree under the memory root's
    #: ``.lw/keys/`` (mode 0600). Give a ``KeyStore`` backed by your KMS in production.
    key_store: KeyStore | None = None
    #: How long a process uses a key it read before reading it again: a key shredded
    #: by ``forget`` stops working in every process within this time.
    key_cache_seconds: float = 1.0

    def __post_init__(self) -> None:
        if self.key_cache_seconds < 0:
            raise ValueError(
                f"PrivacyOptions(key_cache_seconds={self.key_cache_seconds!r}): must be >= 0"
            )
