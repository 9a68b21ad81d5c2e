"""Scope: what one agent may see and write, derived from its workflow ID only.

Data flows one way: workflow ID -> :class:`Scope` -> :class:`Mount` list -> sandbox
arguments. The inputs are ``activity.info()`` (workflow id and type) and the worker's
own configuration (registered definitions, data dir); nothing an activity argument
says can add a mount or turn ``ro`` into ``rw``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path, PurePosixPath

from ._definitions import DefinitionRegistry, WorkflowDefinition
from ._egress._policy import NetworkPolicy
from ._ids import (
    DREAMING_DEFINITION_ID,
    AgentId,
    DataLayout,
    Role,
    check_definition_id,
    parse_workflow_id_for_type,
)
from ._mode import Mode

MNT = PurePosixPath("/mnt")
OWN_SCRATCH = MNT / "scratch" / "own"


class StoreKind(StrEnum):
    """Which of the memory stores a :class:`StoreRef` names; each has its own folder
    under ``memory/`` and its own mount rules."""

    WORKFLOW = "workflow"
    PIPELINE = "pipeline"
    ORG = "org"
    #: Dreaming's own notes about one target (key: the target's definition id).
    DREAMING = "dreaming"


@dataclass(frozen=True, slots=True)
class StoreRef:
    """A memory store: its kind and key (definition id, pipeline key, or ``org``)."""

    kind: StoreKind
    key: str

    def path(self, layout: DataLayout) -> Path:
        if self.kind is StoreKind.WORKFLOW:
            return layout.workflow_memory(self.key)
        if self.kind is StoreKind.PIPELINE:
            return layout.pipeline_memory(self.key)
        if self.kind is StoreKind.DREAMING:
            return layout.workflow_memory(DREAMING_DEFINITION_ID) / check_definition_id(self.key)
        return layout.org_memory

    def __str__(self) -> str:
        return f"{self.kind.value}:{self.key}"


@dataclass(frozen=True, slots=True)
class Mount:
    """One folder of the agent's view: ``virtual`` (under /mnt) shows ``real``."""

    virtual: PurePosixPath
    real: Path
    mode: Mode
    purpose: str
    store: StoreRef | None = None
    #: For a scratch mount: the workflow ID of the agent whose scratch it is.
    owner: str | None = None

    @property
    def writable(self) -> bool:
        return self.mode is Mode.RW


@dataclass(frozen=True, slots=True)
class Scope:
    workflow_id: str
    agent_id: AgentId
    role: Role
    layout: DataLayout
    definition: WorkflowDefinition | None
    mounts: tuple[Mount, ...]
    cwd: PurePosixPath = OWN_SCRATCH
    pipeline_key: str | None = field(default=None)
    #: The hosts this agent's commands may reach (its definition's policy, when the
    #: policy names its role); ``None``: no network.
    network: NetworkPolicy | None = None
    #: The agent's own scratch folder: derived once (every command asks for it).
    own_scratch: Path = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "own_scratch", self.layout.scratch(self.agent_id))

    def mount_at(self, virtual: PurePosixPath | str) -> Mount | None:
        """The mount whose folder holds ``virtual`` (the deepest one), if any."""
        # Compared as text (normalised by PurePosixPath): among the mounts holding the
        # path, the deepest is the one with the longest folder name.
        text = str(PurePosixPath(virtual))
        best: Mount | None = None
        longest = -1
        for mount in self.mounts:
            folder = str(mount.virtual)
            if len(folder) > longest and (
                text == folder or text.startswith(folder if folder == "/" else folder + "/")
            ):
                best, longest = mount, len(folder)
        return best

    def store_mount(self, store: StoreRef) -> Mount | None:
        return next((m for m in self.mounts if m.store == store), None)

    def to_real(self, virtual: PurePosixPath | str) -> Path | None:
        path = PurePosixPath(virtual)
        mount = self.mount_at(path)
        if mount is None:
            return None
        return mount.real.joinpath(*path.relative_to(mount.virtual).parts)

    def describe(self) -> str:
        """The mount description for the agent's system prompt (the seeds' "System
        Prompt Injection"): one line per mount, its mode and what it is for."""
        memory = [m for m in self.mounts if m.store is not None]
        scratch = [m for m in self.mounts if m.store is None]
        lines: list[str] = []
        if memory:
            lines.append("Memory mounts (filesystem; read with bash):")
            lines += [f"- {m.virtual}/ ({m.mode.value}) — {m.purpose}" for m in memory]
            lines.append(
                "Search them with the memory_search tool (best-matching files first, with "
                "line numbers) before reading files one by one."
            )
        if scratch:
            if lines:
                lines.append("")
            lines.append("Scratch mounts (ephemeral, this run only):")
            lines += [f"- {m.virtual}/ ({m.mode.value}) — {m.purpose}" for m in scratch]
        lines.append("")
        lines.append(f"Your working directory is {self.cwd}/. Nothing else is visible.")
        if self.network is not None:
            lines += ["", self.network.describe()]
        return "\n".join(lines)


def _memory_mount(
    name: str, store: StoreRef, layout: DataLayout, mode: Mode, purpose: str
) -> Mount:
    return Mount(MNT / "memory" / name, store.path(layout), mode, purpose, store)


def _workflow_mount(definition: WorkflowDefinition, layout: DataLayout, mode: Mode) -> Mount:
    return _memory_mount(
        "workflow",
        StoreRef(StoreKind.WORKFLOW, definition.id),
        layout,
        mode,
        f"persistent notes for workflow {definition.id} across all runs.",
    )


def _org_mount(layout: DataLayout, mode: Mode) -> Mount:
    return _memory_mount(
        "org",
        StoreRef(StoreKind.ORG, "org"),
        layout,
        mode,
        "organization-wide knowledge (policies, runbooks, skills/).",
    )


def _pipeline_mount(key: str, layout: DataLayout, mode: Mode) -> Mount:
    return _memory_mount(
        "pipeline",
        StoreRef(StoreKind.PIPELINE, key),
        layout,
        mode,
        "persistent notes shared by every run of this pipeline composition.",
    )


def _peer_mounts(definition: WorkflowDefinition, layout: DataLayout) -> list[Mount]:
    return [
        _memory_mount(
            f"peer-workflows/{spec.id}",
            StoreRef(StoreKind.WORKFLOW, spec.id),
            layout,
            Mode.RO,
            f"peer workflow {spec.id}'s accumulated lessons.",
        )
        for spec in definition.memory.attach
    ]


def _scratch(agent_id: AgentId, layout: DataLayout, name: str, mode: Mode, purpose: str) -> Mount:
    return Mount(
        MNT / "scratch" / name, layout.scratch(agent_id), mode, purpose, owner=str(agent_id)
    )


def _from_orchestrator(agent_id: AgentId, layout: DataLayout) -> list[Mount]:
    """The orchestrator's scratch, read-only, for a planner or worker inside a pipeline."""
    if agent_id.orchestrator_id is None:
        return []
    return [
        _scratch(
            agent_id.orchestrator_id,
            layout,
            "from-orchestrator",
            Mode.RO,
            "the orchestrator's notes for this run.",
        )
    ]


def _access(value: str) -> Mode | None:
    return None if value == "none" else Mode(value)


def derive_scope(
    workflow_id: str,
    workflow_type: str,
    definitions: DefinitionRegistry,
    layout: DataLayout,
) -> Scope:
    """The scope of the agent running as ``workflow_id`` (DESIGN section 3).

    Raises ``InvalidWorkflowId`` for an ID outside the grammar or of the wrong role,
    ``KeyError`` for a definition this worker does not serve.
    """
    agent_id = parse_workflow_id_for_type(workflow_id, workflow_type)
    role = agent_id.role
    mounts: list[Mount] = []
    definition: WorkflowDefinition | None = None
    in_pipeline = agent_id.pipeline is not None
    key = definitions.pipeline_key if in_pipeline else None

    if role is Role.ORCHESTRATOR:
        assert key is not None
        mounts.append(_pipeline_mount(key, layout, Mode.RW))
        mounts.append(_org_mount(layout, Mode.RO))
        for def_id in definitions:
            mounts.append(
                _memory_mount(
                    f"available-workflows/{def_id}",
                    StoreRef(StoreKind.WORKFLOW, def_id),
                    layout,
                    Mode.RO,
                    f"workflow {def_id}'s accumulated lessons (read before planning).",
                )
            )
        mounts.append(
            _scratch(agent_id, layout, "own", Mode.RW, "your working area for this pipeline run.")
        )
    elif role is Role.PLANNER:
        assert agent_id.definition_id is not None
        definition = definitions[agent_id.definition_id]
        workflow_mode = _access(definition.memory.workflow)
        if workflow_mode is not None:
            mounts.append(_workflow_mount(definition, layout, workflow_mode))
        if key is not None:
            mounts.append(_pipeline_mount(key, layout, Mode.RO))
        org_mode = _access(definition.memory.org)
        if org_mode is not None:
            mounts.append(_org_mount(layout, org_mode))
        mounts += _peer_mounts(definition, layout)
        mounts.append(
            _scratch(
                agent_id, layout, "own", Mode.RW, "your working area; write plan docs for workers."
            )
        )
        mounts += _from_orchestrator(agent_id, layout)
    elif role is Role.WORKER:
        assert agent_id.definition_id is not None and agent_id.planner_id is not None
        definition = definitions[agent_id.definition_id]
        if definition.memory.workflow != "none":
            mounts.append(_workflow_mount(definition, layout, Mode.RO))
        if key is not None:
            mounts.append(_pipeline_mount(key, layout, Mode.RO))
        if definition.memory.org != "none":
            mounts.append(_org_mount(layout, Mode.RO))
        mounts += _peer_mounts(definition, layout)
        mounts.append(
            _scratch(agent_id, layout, "own", Mode.RW, "your working area for this step.")
        )
        mounts += _from_orchestrator(agent_id, layout)
        mounts.append(
            _scratch(
                agent_id.planner_id,
                layout,
                "from-planner",
                Mode.RO,
                "your planner's plan and notes for this run.",
            )
        )
    else:  # dreaming
        assert agent_id.definition_id is not None
        target = definitions[agent_id.definition_id]
        mounts.append(
            _memory_mount(
                "workflow",
                StoreRef(StoreKind.DREAMING, target.id),
                layout,
                Mode.RW,
                f"your consolidated notes for {target.id}: each file you write here is "
                f"proposed, after human review, as the file of the same path in {target.id}'s "
                "memory.",
            )
        )
        mounts.append(_org_mount(layout, Mode.RO))
        mounts.append(
            _memory_mount(
                f"peer-workflows/{target.id}",
                StoreRef(StoreKind.WORKFLOW, target.id),
                layout,
                Mode.RO,
                f"the memory of {target.id}, the workflow being consolidated.",
            )
        )
        mounts.append(
            _scratch(
                agent_id,
                layout,
                "own",
                Mode.RW,
                "your working area; runs/ holds one file per run to consolidate.",
            )
        )
    policy = definition.network if definition is not None else None
    return Scope(
        workflow_id=str(agent_id),
        agent_id=agent_id,
        role=role,
        layout=layout,
        definition=definition,
        mounts=tuple(mounts),
        pipeline_key=key,
        network=policy if policy is not None and role.value in policy.roles else None,
    )
