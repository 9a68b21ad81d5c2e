"""Workflow IDs and the on-disk layout they define.

The workflow ID *is* the run's path under ``<dataDir>/runs/``: that single rule gives
every agent its own scratch folder and lets an activity recover the whole hierarchy
(pipeline, planner, step) from ``activity.info().workflow_id`` alone, with nothing the
caller could forge in an argument.

Grammar (DESIGN section 2)::

    orchestrator  pipeline_<token>
    planner       [<orchestrator id>/sub-runs/]run_<definition id>@<token>
    worker        <planner id>/steps/step_<token>
    dreaming      dream_<definition id>@<token>

Everything here is pure and deterministic, so workflow code may import it.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

DEFINITION_ID_PATTERN = r"[a-z0-9][a-z0-9._-]{0,62}"
#: The folders of the agents' ``/mnt/memory/``: one store each, and two that hold one
#: store per definition (``peer-workflows/<id>``, ``available-workflows/<id>``). A
#: setting naming a memory path anywhere else would never match what an agent touches.
MEMORY_STORE_FOLDERS = ("workflow", "pipeline", "org")
MEMORY_GROUP_FOLDERS = ("peer-workflows", "available-workflows")
TOKEN_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
# Temporal Schedules append "-<RFC 3339 time>" to the workflow IDs they start, so a
# dreaming token may also hold ':' and '+'.
DREAM_TOKEN_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:+-]{0,95}"

_DEFINITION_ID = re.compile(DEFINITION_ID_PATTERN)
_TOKEN = re.compile(TOKEN_PATTERN)
_DREAM_TOKEN = re.compile(DREAM_TOKEN_PATTERN)

#: Temporal's default limit on workflow ID length.
MAX_WORKFLOW_ID_LENGTH = 1000

ORCHESTRATOR_WORKFLOW = "lw.Orchestrator"
PLANNER_WORKFLOW = "lw.Planner"
WORKER_WORKFLOW = "lw.Worker"
DREAMING_WORKFLOW = "lw.Dreaming"

#: The activity that runs an agent's bash command (it takes a ``BashRequest``), as
#: histories, interceptors and traces show it.
BASH_ACTIVITY = "lw.bash"
#: The query every agent workflow answers with its ``Progress``.
PROGRESS_QUERY = "lw.progress"

#: The definition id under which dreaming keeps its own notes.
DREAMING_DEFINITION_ID = "memory.dreaming"

#: Folder names of the library's own bookkeeping; never mounted for an agent.
STATE_DIR_NAME = ".lw"


class Role(StrEnum):
    """An agent's place in the hierarchy; it decides the workflow type, the tools the
    model is offered and which memory and scratch folders the sandbox shows."""

    ORCHESTRATOR = "orchestrator"
    PLANNER = "planner"
    WORKER = "worker"
    DREAMING = "dreaming"


WORKFLOW_TYPE_FOR_ROLE: dict[Role, str] = {
    Role.ORCHESTRATOR: ORCHESTRATOR_WORKFLOW,
    Role.PLANNER: PLANNER_WORKFLOW,
    Role.WORKER: WORKER_WORKFLOW,
    Role.DREAMING: DREAMING_WORKFLOW,
}
ROLE_FOR_WORKFLOW_TYPE: dict[str, Role] = {v: k for k, v in WORKFLOW_TYPE_FOR_ROLE.items()}


class InvalidWorkflowId(ValueError):
    """A workflow ID that does not follow the grammar; the message says how to fix it."""


def is_definition_id(value: str) -> bool:
    return _DEFINITION_ID.fullmatch(value) is not None


def check_definition_id(value: str) -> str:
    if not is_definition_id(value):
        raise ValueError(
            f"definition id {value!r} is not valid: use 1-63 characters of lowercase "
            f"letters, digits, '.', '_' or '-', starting with a letter or digit "
            f"(pattern {DEFINITION_ID_PATTERN})"
        )
    return value


def check_token(value: str) -> str:
    if not _TOKEN.fullmatch(value):
        raise InvalidWorkflowId(
            f"token {value!r} is not valid: use 1-64 characters of letters, digits, "
            f"'.', '_' or '-', starting with a letter or digit (pattern {TOKEN_PATTERN})"
        )
    return value


@dataclass(frozen=True, slots=True)
class AgentId:
    """A parsed workflow ID: which agent this is and where it sits in the hierarchy.

    Not Temporal's run id (``Provenance.run_id``, one execution of a workflow ID): an
    ``AgentId`` names the agent, and with it its scratch folder, across all of its runs.

    ``pipeline`` is the orchestrator's token, ``definition_id``/``run`` the planner's
    ``run_<definition id>@<token>`` segment, ``step`` the worker's token. The role
    follows from which parts are present.
    """

    pipeline: str | None = None
    definition_id: str | None = None
    run: str | None = None
    step: str | None = None
    dream: bool = False

    def __post_init__(self) -> None:
        if self.dream:
            if self.pipeline is not None or self.step is not None:
                raise InvalidWorkflowId("a dreaming run has no pipeline and no step")
            if self.definition_id is None or self.run is None:
                raise InvalidWorkflowId("a dreaming run needs a definition id and a token")
            check_definition_id(self.definition_id)
            if not _DREAM_TOKEN.fullmatch(self.run):
                raise InvalidWorkflowId(
                    f"dreaming token {self.run!r} is not valid (pattern {DREAM_TOKEN_PATTERN})"
                )
            return
        if self.pipeline is not None:
            check_token(self.pipeline)
        if (self.definition_id is None) != (self.run is None):
            raise InvalidWorkflowId("a planner run needs both a definition id and a token")
        if self.definition_id is not None:
            check_definition_id(self.definition_id)
        if self.run is not None:
            check_token(self.run)
        if self.step is not None:
            check_token(self.step)
            if self.run is None:
                raise InvalidWorkflowId("a step must sit under a planner run (run_<id>@<token>)")
        if self.pipeline is None and self.run is None:
            raise InvalidWorkflowId("an ID needs a pipeline_ or run_ segment")
        if len(str(self)) > MAX_WORKFLOW_ID_LENGTH:
            raise InvalidWorkflowId(
                f"workflow ID is longer than {MAX_WORKFLOW_ID_LENGTH} characters"
            )

    # -- constructors -------------------------------------------------------------
    @classmethod
    def orchestrator(cls, token: str) -> AgentId:
        return cls(pipeline=token)

    @classmethod
    def planner(cls, definition_id: str, token: str, *, pipeline: str | None = None) -> AgentId:
        return cls(pipeline=pipeline, definition_id=definition_id, run=token)

    @classmethod
    def dreaming(cls, definition_id: str, token: str) -> AgentId:
        return cls(definition_id=definition_id, run=token, dream=True)

    def sub_run(self, definition_id: str, token: str) -> AgentId:
        """The ID of a planner started by this orchestrator."""
        if self.role is not Role.ORCHESTRATOR:
            raise InvalidWorkflowId(f"only an orchestrator starts sub-runs, not {self}")
        return AgentId(pipeline=self.pipeline, definition_id=definition_id, run=token)

    def step_run(self, token: str) -> AgentId:
        """The ID of a worker step started by this planner."""
        if self.role is not Role.PLANNER:
            raise InvalidWorkflowId(f"only a planner starts steps, not {self}")
        return AgentId(
            pipeline=self.pipeline, definition_id=self.definition_id, run=self.run, step=token
        )

    # -- derived ------------------------------------------------------------------
    @property
    def role(self) -> Role:
        if self.dream:
            return Role.DREAMING
        if self.step is not None:
            return Role.WORKER
        if self.run is not None:
            return Role.PLANNER
        return Role.ORCHESTRATOR

    @property
    def workflow_type(self) -> str:
        return WORKFLOW_TYPE_FOR_ROLE[self.role]

    @property
    def parent(self) -> AgentId | None:
        if self.role is Role.WORKER:
            return AgentId(pipeline=self.pipeline, definition_id=self.definition_id, run=self.run)
        if self.role is Role.PLANNER and self.pipeline is not None:
            return AgentId(pipeline=self.pipeline)
        return None

    @property
    def orchestrator_id(self) -> AgentId | None:
        return None if self.pipeline is None else AgentId(pipeline=self.pipeline)

    @property
    def planner_id(self) -> AgentId | None:
        if self.run is None or self.dream:
            return None
        return AgentId(pipeline=self.pipeline, definition_id=self.definition_id, run=self.run)

    @property
    def segments(self) -> tuple[str, ...]:
        """The ID's path segments, which are also its folders under ``runs/``."""
        if self.dream:
            return (f"dream_{self.definition_id}@{self.run}",)
        parts: list[str] = []
        if self.pipeline is not None:
            parts.append(f"pipeline_{self.pipeline}")
        if self.run is not None:
            if self.pipeline is not None:
                parts.append("sub-runs")
            parts.append(f"run_{self.definition_id}@{self.run}")
        if self.step is not None:
            parts += ["steps", f"step_{self.step}"]
        return tuple(parts)

    def __str__(self) -> str:
        return "/".join(self.segments)

    def is_child_of(self, other: AgentId) -> bool:
        return self.parent == other


def _split_run(segment: str, workflow_id: str) -> tuple[str, str]:
    body = segment.removeprefix("run_")
    definition_id, sep, token = body.partition("@")
    if not sep:
        raise InvalidWorkflowId(
            f"workflow ID {workflow_id!r}: segment {segment!r} must be run_<definition id>@<token>"
        )
    return definition_id, token


def parse_workflow_id(workflow_id: str) -> AgentId:
    """Parse a workflow ID of the grammar, or raise :class:`InvalidWorkflowId` saying why."""
    if not isinstance(workflow_id, str):
        raise InvalidWorkflowId("workflow ID is empty")
    return _parse_workflow_id(workflow_id)


@functools.lru_cache(maxsize=4096)
def _parse_workflow_id(workflow_id: str) -> AgentId:
    """Cached: every payload's codec context and every activity parses its run's ID
    (tens of times per agent), and an ``AgentId`` is immutable."""
    if not workflow_id:
        raise InvalidWorkflowId("workflow ID is empty")
    if "\x00" in workflow_id:
        raise InvalidWorkflowId("workflow ID contains a NUL byte")
    if len(workflow_id) > MAX_WORKFLOW_ID_LENGTH:
        raise InvalidWorkflowId(
            f"workflow ID is {len(workflow_id)} characters; the limit is {MAX_WORKFLOW_ID_LENGTH}"
        )
    segments = workflow_id.split("/")
    for segment in segments:
        if segment in ("", ".", ".."):
            raise InvalidWorkflowId(
                f"workflow ID {workflow_id!r} has an empty, '.' or '..' segment; IDs are "
                "run paths and may not traverse"
            )
    try:
        return _parse_segments(segments, workflow_id)
    except InvalidWorkflowId:
        raise
    except ValueError as err:  # a definition id that fails its pattern
        raise InvalidWorkflowId(f"workflow ID {workflow_id!r}: {err}") from None


def _parse_segments(segments: list[str], workflow_id: str) -> AgentId:
    expected = (
        "expected pipeline_<token>, [pipeline_<token>/sub-runs/]run_<definition>@<token>"
        "[/steps/step_<token>] or dream_<definition>@<token>"
    )
    pipeline: str | None = None
    rest = segments
    head = rest[0]
    if head.startswith("dream_") and len(rest) == 1:
        definition_id, _, token = head.removeprefix("dream_").partition("@")
        return AgentId.dreaming(definition_id, token)
    if head.startswith("pipeline_"):
        pipeline = head.removeprefix("pipeline_")
        rest = rest[1:]
        if not rest:
            return AgentId(pipeline=pipeline)
        if rest[0] != "sub-runs" or len(rest) < 2:
            raise InvalidWorkflowId(f"workflow ID {workflow_id!r}: {expected}")
        rest = rest[1:]
    if not rest[0].startswith("run_"):
        raise InvalidWorkflowId(f"workflow ID {workflow_id!r}: {expected}")
    definition_id, token = _split_run(rest[0], workflow_id)
    rest = rest[1:]
    if not rest:
        return AgentId(pipeline=pipeline, definition_id=definition_id, run=token)
    if len(rest) != 2 or rest[0] != "steps" or not rest[1].startswith("step_"):
        raise InvalidWorkflowId(f"workflow ID {workflow_id!r}: {expected}")
    return AgentId(
        pipeline=pipeline, definition_id=definition_id, run=token, step=rest[1][len("step_") :]
    )


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def parse_workflow_id_for_type(workflow_id: str, workflow_type: str) -> AgentId:
    """Parse and check that the ID's role is the one ``workflow_type`` runs."""
    agent_id = parse_workflow_id(workflow_id)
    role = ROLE_FOR_WORKFLOW_TYPE.get(workflow_type)
    if role is None:
        raise InvalidWorkflowId(
            f"workflow type {workflow_type!r} is not an lw workflow "
            f"({', '.join(ROLE_FOR_WORKFLOW_TYPE)})"
        )
    if agent_id.role is not role:
        found, wanted = agent_id.role.value, role.value
        raise InvalidWorkflowId(
            f"workflow ID {workflow_id!r} is {_article(found)} {found} ID but runs as "
            f"{workflow_type}; start it as {agent_id.workflow_type} or use "
            f"{_article(wanted)} {wanted} ID"
        )
    return agent_id


@dataclass(frozen=True, slots=True)
class DataLayout:
    """Where everything lives under the data dir (DESIGN sections 2, 3 and 7).

    Two roots, the same folder unless configured apart: ``root`` (the memory root)
    holds ``memory/`` and the stores' bookkeeping, and must be one volume for every
    worker; ``runs_root`` holds ``runs/`` and host-local bookkeeping (sandbox and
    staging folders, retention trash), and may be each host's own disk when runs are
    pinned to hosts (see the README's topologies).
    """

    root: Path
    runs_root: Path | None = None

    @classmethod
    def at(cls, data_dir: str | Path) -> DataLayout:
        return cls(Path(data_dir).absolute())

    @classmethod
    def split(cls, memory_root: str | Path, runs_root: str | Path) -> DataLayout:
        """Memory on one root (a shared volume), runs on another (a host's disk)."""
        memory, runs = Path(memory_root).absolute(), Path(runs_root).absolute()
        return cls(memory, None if runs == memory else runs)

    @property
    def memory_root(self) -> Path:
        return self.root

    @property
    def local_root(self) -> Path:
        """The root of ``runs/``: the whole data dir, or the host's own runs root."""
        return self.runs_root or self.root

    @property
    def runs(self) -> Path:
        return self.local_root / "runs"

    @property
    def memory(self) -> Path:
        return self.root / "memory"

    @property
    def state(self) -> Path:
        """The memory stores' bookkeeping (audit, versions, locks): never mounted,
        and on the memory root, since every worker must see the same."""
        return self.root / STATE_DIR_NAME

    @property
    def local_state(self) -> Path:
        """Bookkeeping of this host's runs (sandbox and staging folders, retention
        trash): never mounted, beside ``runs/``."""
        return self.local_root / STATE_DIR_NAME

    @property
    def conversations(self) -> Path:
        """Each agent's conversation bookkeeping (turn files, tool results, its text
        editor's notes), by its ID's folders: never mounted, removed by retention."""
        return self.local_state / "conversations"

    @property
    def memory_id_file(self) -> Path:
        """The memory root's identity, which every worker of a deployment must share."""
        return self.state / "memory-id"

    @property
    def binding_file(self) -> Path:
        """This runs root's id and the memory root (by id) it serves."""
        return self.local_state / "binding.json"

    def tree_entry(self, top_level: AgentId) -> Path:
        """On the memory root: which runs root a top-level run's tree lives on."""
        return self.state / "trees" / f"{top_level}.json"

    def run_marker(self, agent_id: AgentId) -> Path:
        """Present on the disk that holds the run's scratch; in the runs root's own
        bookkeeping, so ``runs/`` keeps exactly the layout of the IDs."""
        digest = hashlib.sha256(str(agent_id).encode()).hexdigest()[:32]
        return self.local_state / "runs" / f"{digest}.json"

    def run_dir(self, agent_id: AgentId) -> Path:
        return self.runs.joinpath(*agent_id.segments)

    def scratch(self, agent_id: AgentId) -> Path:
        return self.run_dir(agent_id) / "scratch"

    def workflow_memory(self, definition_id: str) -> Path:
        return self.memory / "workflows" / check_definition_id(definition_id)

    def pipeline_memory(self, pipeline_key: str) -> Path:
        if not re.fullmatch(r"[0-9a-f]{64}", pipeline_key):
            raise ValueError(f"pipeline key {pipeline_key!r} is not a sha256 hex digest")
        return self.memory / "pipelines" / pipeline_key

    @property
    def org_memory(self) -> Path:
        return self.memory / "org"


#: Custom search attributes (Keyword) the workflows set when the server has them
#: registered, so the Temporal UI can filter by role and definition.
SEARCH_ATTRIBUTE_ROLE = "LwRole"
SEARCH_ATTRIBUTE_DEFINITION = "LwDefinition"
