"""Workflow definitions (the seeds' ``defineWorkflow``), their hashes and the pipeline key.

A definition is data: it names a workflow, says what its agents are for and which
memory they may touch. Validation happens at construction so that a typo in a
definition fails where it is written, not in the middle of a run.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, field_validator, model_serializer

from ._approvals._rules import ApprovalRule
from ._base import FrozenModel
from ._egress._policy import NetworkPolicy
from ._ids import (
    DREAMING_DEFINITION_ID,
    MEMORY_GROUP_FOLDERS,
    MEMORY_STORE_FOLDERS,
    check_definition_id,
)

Access = Literal["rw", "ro", "none"]
#: A store whose writes by a tainted run wait in quarantine (``MemoryConfig.quarantine``).
QuarantinedStore = Literal["workflow", "org"]
_GIT_AUTHOR = re.compile(r"[^<>\n]+ <[^<>\s]+>")

#: Default fan-out bounds of a definition: children a planner starts per turn and per
#: run, and the turns its whole tree (planner and steps) may take.
MAX_CHILDREN_PER_TURN = 10
MAX_CHILDREN = 50
MAX_TREE_TURNS = 1000
_DEFAULT_BOUNDS = {
    "max_children_per_turn": MAX_CHILDREN_PER_TURN,
    "max_children": MAX_CHILDREN,
    "max_tree_turns": MAX_TREE_TURNS,
}


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no insignificant whitespace, UTF-8 (DESIGN section 3)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class AttachSpec(FrozenModel):
    """A peer workflow whose memory is mounted read-only.

    ``untrusted``: what the peer's runs wrote is untrusted input here (a run that reads
    it is tainted, see the README's taint section). Not part of the definition's hash."""

    id: str
    mode: str = "ro"
    untrusted: bool = Field(default=False, exclude=True)

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return check_definition_id(value)

    @field_validator("mode")
    @classmethod
    def _mode(cls, value: str) -> str:
        if value != "ro":
            raise ValueError(
                f"attach mode must be 'ro', got {value!r}: a peer's memory is read-only; "
                "to write a store, make it this workflow's own (memory.workflow)"
            )
        return value


class MemoryConfig(FrozenModel):
    """Which memory stores a definition's agents see, and how.

    ``workflow`` defaults to ``rw`` (a workflow curates its own lessons); ``org`` to
    ``ro``: writing org memory must be asked for, since a mistaken grant poisons
    every workflow of the organisation.
    """

    workflow: Access = "rw"
    org: Access = "ro"
    attach: tuple[AttachSpec, ...] = ()
    #: Paths of the agents' view (``/mnt/memory/org/inbox/``) whose contents are
    #: untrusted input: a run that reads below one is tainted.
    untrusted: tuple[str, ...] = Field(default=(), exclude=True, max_length=64)
    #: The stores whose writes by a tainted run wait in quarantine until released
    #: (the orchestrator's pipeline writes always do); a store left out takes a tainted
    #: run's writes at once, marked tainted, and taints every run that reads them.
    quarantine: tuple[QuarantinedStore, ...] = Field(default=("workflow", "org"), exclude=True)
    #: The name of a ``QuarantinePolicy`` in ``MemoryOptions(quarantine_policies=...)``
    #: that decides on held changes as they are held; ``None``: a person decides.
    release_policy: str | None = Field(default=None, exclude=True)

    @field_validator("attach")
    @classmethod
    def _unique(cls, value: tuple[AttachSpec, ...]) -> tuple[AttachSpec, ...]:
        seen: set[str] = set()
        for spec in value:
            if spec.id in seen:
                raise ValueError(f"attach lists {spec.id!r} twice; list each peer once")
            seen.add(spec.id)
        return value

    @field_validator("untrusted")
    @classmethod
    def _untrusted(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(untrusted_prefix(p) for p in value)


#: An untrusted path under any other folder of ``/mnt/memory/`` would never be read, so
#: the runs reading what it was meant to name would go untainted.
_MEMORY_MOUNTS = frozenset((*MEMORY_STORE_FOLDERS, *MEMORY_GROUP_FOLDERS))


def untrusted_prefix(path: str) -> str:
    """A path of the agents' view under ``/mnt/memory/<mount>/``, normalized, or a
    ValueError saying what one looks like."""
    given = PurePosixPath(path)
    if (
        not path.startswith("/mnt/memory/")
        or ".." in given.parts
        or "\x00" in path
        or len(given.parts) < 4
        or given.parts[3] not in _MEMORY_MOUNTS
    ):
        raise ValueError(
            f"untrusted path {path!r} must name a folder or file of the agents' memory "
            "view, e.g. '/mnt/memory/org/inbox/' or '/mnt/memory/peer-workflows/<id>/'"
        )
    return str(given)


class MemoryQuota(FrozenModel):
    """Limits of one memory store; a write that would pass them is refused whole."""

    max_bytes: int = Field(default=64 * 1024 * 1024, gt=0)
    max_files: int = Field(default=10_000, gt=0)
    max_file_bytes: int = Field(default=4 * 1024 * 1024, gt=0)


class WorkflowDefinition(FrozenModel):
    """One agent workflow: its id, what its agents are told, its memory, how far a run
    of it may go, which of its agents' actions a person approves first (``approvals``)
    and, when its agents need hosts on the network, which ones (``network``; none by
    default).

    How far a run may go: turns per agent (``max_turns``), steps a planner starts per
    turn and per run (``max_children_per_turn``, ``max_children``) and turns of the
    whole tree, planner and steps (``max_tree_turns``). A model asking for more gets an
    error result saying which bound it hit.

    ``git_author`` (``"Name <email>"``) is who its agents' git commits are by in the
    sandbox (default: the definition and role, ``cr worker <worker@cr.invalid>``); it
    is not part of the definition's hash, so setting it moves no memory."""

    id: str
    instructions: str = ""
    description: str = ""
    memory: MemoryConfig = MemoryConfig()
    quota: MemoryQuota = MemoryQuota()
    max_turns: int = Field(default=24, gt=0, le=10_000)
    max_children_per_turn: int = Field(default=MAX_CHILDREN_PER_TURN, gt=0, le=1_000)
    #: At most Temporal's default limit of pending children per workflow (2,000).
    max_children: int = Field(default=MAX_CHILDREN, gt=0, le=2_000)
    max_tree_turns: int = Field(default=MAX_TREE_TURNS, gt=0, le=1_000_000)
    approvals: tuple[ApprovalRule, ...] = Field(default=(), max_length=100)
    git_author: str | None = Field(default=None, exclude=True)
    network: NetworkPolicy | None = None

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return check_definition_id(value)

    @field_validator("git_author")
    @classmethod
    def _git_author(cls, value: str | None) -> str | None:
        if value is not None and (not _GIT_AUTHOR.fullmatch(value) or value != value.strip()):
            raise ValueError(
                f"git_author must look like 'Name <email>' (as git commit --author), got {value!r}"
            )
        return value

    @model_serializer(mode="wrap")
    def _without_unset_sections(self, handler: SerializerFunctionWrapHandler) -> Any:
        """A definition without a network policy or approval rules, and with the default
        fan-out bounds, dumps (and so hashes) as before there were any of them: its
        pipeline store keeps its key."""
        data = handler(self)
        if isinstance(data, dict):
            for name, default in _DEFAULT_BOUNDS.items():
                if data.get(name) == default:
                    data.pop(name)
            if self.network is None:
                data.pop("network", None)
            if not self.approvals:
                data.pop("approvals", None)
        return data

    def canonical(self) -> bytes:
        return canonical_json(self.model_dump(mode="json"))

    @property
    def definition_hash(self) -> str:
        """``sha256(canonical JSON of the definition)``."""
        return sha256_hex(self.canonical())


def pipeline_key(definitions: Iterable[WorkflowDefinition]) -> str:
    """``sha256(canonical JSON of the sorted list of definition hashes)``: runs of the
    same composition share one pipeline store, whatever order they were listed in."""
    hashes = sorted(d.definition_hash for d in definitions)
    return sha256_hex(canonical_json(hashes))


class DefinitionRegistry(Mapping[str, WorkflowDefinition]):
    """The definitions one plugin serves; checked as a whole (ids unique, attaches known)."""

    def __init__(self, definitions: Iterable[WorkflowDefinition]) -> None:
        by_id: dict[str, WorkflowDefinition] = {}
        for definition in definitions:
            if not isinstance(definition, WorkflowDefinition):
                raise TypeError(
                    f"definitions must be WorkflowDefinition objects, got {type(definition)!r}"
                )
            if definition.id in by_id:
                raise ValueError(
                    f"definition id {definition.id!r} is registered twice; give each "
                    "definition its own id"
                )
            if definition.id == DREAMING_DEFINITION_ID:
                raise ValueError(
                    f"definition id {DREAMING_DEFINITION_ID!r} is reserved for dreaming"
                )
            by_id[definition.id] = definition
        for definition in by_id.values():
            for spec in definition.memory.attach:
                if spec.id not in by_id:
                    raise ValueError(
                        f"definition {definition.id!r} attaches {spec.id!r}, which is not "
                        f"registered; register it too (known: {sorted(by_id) or 'none'})"
                    )
                if spec.id == definition.id:
                    raise ValueError(
                        f"definition {definition.id!r} attaches itself; its own store is "
                        "already mounted at /mnt/memory/workflow/"
                    )
        self._by_id = by_id
        self.pipeline_key = pipeline_key(by_id.values())

    def __getitem__(self, key: str) -> WorkflowDefinition:
        try:
            return self._by_id[key]
        except KeyError:
            raise KeyError(
                f"definition {key!r} is not registered with this worker "
                f"(registered: {sorted(self._by_id) or 'none'})"
            ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._by_id))

    def __len__(self) -> int:
        return len(self._by_id)
