"""Several hosts: which worker may run a run's activities, and the checks that say so.

Two topologies are supported (README, "Several hosts"):

* **shared volume**: every worker mounts the same data dir, so every worker holds
  every run's scratch and any worker may run any activity;
* **pinned runs**: memory on a shared volume, each host's runs on its own disk. Each
  worker is started with a host name and also polls a host task queue
  (``<task queue>@<host>``, Temporal's worker-specific task queue pattern). A
  top-level run asks the worker running its first workflow task for that queue once
  (with its other worker settings, the ``lw.settings`` local activity), keeps the
  answer in workflow state and hands it to its children as configuration, so the
  whole tree's activities run on the host where its scratch is.

Everything else is a wrong topology, and the checks here turn it into a clear error
instead of an agent working in an empty scratch or a host growing its own copy of
"the" memory: a run's marker (a small file in the runs root's ``.lw/``) says which
disk holds it, and the memory root carries an id that every worker's runs root is bound to.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from temporalio import activity, workflow
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutType
from temporalio.exceptions import TimeoutError as TemporalTimeout

from ._ids import STATE_DIR_NAME, AgentId, DataLayout, InvalidWorkflowId, parse_workflow_id
from ._placement import placed_tree
from .errors._kinds import HOST_LOST, WRONG_TOPOLOGY, lw_error

#: Default time a pinned host may take to pick up an activity before the run fails.
DEFAULT_HOST_TIMEOUT = timedelta(minutes=5)

TOPOLOGY_OPTIONS = (
    "lw supports two topologies (README, 'Several hosts'): a shared volume (every "
    "worker mounts the same data dir: --data-dir on NFS/EFS/CephFS), or pinned runs "
    "(one shared --memory-root, a local --runs-root per host, and each worker started "
    "with --host NAME so a run's whole tree runs on its host)"
)


class HostPin(BaseModel):
    """Where a run tree's activities go: workflow configuration, from the top-level
    run's first workflow task to every descendant (never an activity argument).

    ``task_queue`` is ``None`` when the worker that answered is not pinned to a host
    (the shared-volume topology): activities then go to the workflow's own queue.
    """

    task_queue: str | None = None
    host: str | None = None
    host_timeout_seconds: float | None = None
    #: The id of the runs root the tree was placed on (its top-level run's first
    #: workflow task ran there): every activity of the tree must run on a worker of
    #: that runs root (``_placement`` carries it to them).
    runs_id: str | None = Field(default=None, max_length=512)


# -- workflow side (deterministic) ------------------------------------------------------
def placement(pin: HostPin | None) -> dict[str, Any]:
    """The ``execute_activity`` options that send an activity to the run's host."""
    if pin is None or pin.task_queue is None:
        return {}
    seconds = pin.host_timeout_seconds or DEFAULT_HOST_TIMEOUT.total_seconds()
    return {"task_queue": pin.task_queue, "schedule_to_start_timeout": timedelta(seconds=seconds)}


def placement_failure(
    err: ActivityError | ApplicationError, pin: HostPin | None
) -> ApplicationError | None:
    """The run's own failure when an activity failed for where it ran, not for what it
    did: on a wrong host or a lost one nothing the agent tries next can work (a local
    activity's failure may arrive as its ApplicationError itself)."""
    cause = err.cause if isinstance(err, ActivityError) else err
    info = workflow.info()
    if isinstance(cause, ApplicationError) and cause.type == WRONG_TOPOLOGY:
        return ApplicationError(cause.message, type=WRONG_TOPOLOGY, non_retryable=True)
    if (
        isinstance(err, ActivityError)
        and isinstance(cause, TemporalTimeout)
        and cause.type is TimeoutType.SCHEDULE_TO_START
        and pin is not None
        and pin.task_queue is not None
    ):
        seconds = pin.host_timeout_seconds or DEFAULT_HOST_TIMEOUT.total_seconds()
        return lw_error(
            HOST_LOST,
            f"workflow {info.workflow_id!r}: host {pin.host!r} did not pick up "
            f"{err.activity_type} from its task queue {pin.task_queue!r} within {seconds:g}s "
            "(host_timeout), and this run's scratch is on that host. Start that host's "
            "worker again (same --runs-root and --host) and run it again, or start a new "
            "top-level run, which any live host may take.",
        )
    return None


def host_queue(task_queue: str, host: str) -> str:
    """The task queue only ``host``'s worker polls."""
    return f"{task_queue}@{host}"


def check_host_name(host: str) -> str:
    if not host or len(host) > 200 or any(c in host for c in "@/\x00") or host.strip() != host:
        raise ValueError(
            f"host name {host!r} is not valid: use 1-200 characters without '@', '/', NUL "
            "or surrounding spaces (it becomes part of a task queue name)"
        )
    return host


def check_roots(layout: DataLayout) -> None:
    """Refuse a runs root inside the memory root's ``memory/`` or ``.lw/`` (its scratch
    would be memory every agent reads, written past every memory rule, or sit among
    the stores' keys and journals), and a memory root inside the runs root's ``runs/``
    or ``.lw/`` (scratch retention and the sandbox's cleanup would reach the stores)."""
    if layout.runs_root is None:
        return
    memory, runs = layout.root.resolve(), layout.runs_root.resolve()
    pairs = (
        ("runs root", runs, "memory root", memory, ("memory", STATE_DIR_NAME)),
        ("memory root", memory, "runs root", runs, ("runs", STATE_DIR_NAME)),
    )
    for inner_name, inner, outer_name, outer, folders in pairs:
        for name in folders:
            folder = outer / name
            if inner == folder or folder in inner.parents:
                raise ValueError(
                    f"the {inner_name} {inner} is inside the {outer_name}'s {folder}, which "
                    f"lw manages: give the {inner_name} a folder of its own, outside "
                    + " and ".join(str(outer / n) for n in folders)
                )


class TopologyMismatch(RuntimeError):
    """The worker's roots are not the ones its peers use: it must not start."""


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise TopologyMismatch(f"{path} is unreadable ({err}); remove it and start again") from None
    return data if isinstance(data, dict) else None


def _marker_of(path: Path) -> dict[str, Any] | None:
    try:
        return _read_json(path)
    except TopologyMismatch:
        return None


def publish(path: Path, data: bytes, *, sync: bool = True) -> bool:
    """Create ``path`` with ``data`` unless it exists: write a temp file, then
    ``link`` it into place (exclusive and atomic on NFS too, unlike a plain
    ``O_EXCL`` open followed by a write, which a reader may see empty). ``sync=False``
    skips the ``fsync`` where a record lost to a power cut is only made again."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)


@dataclass
class Topology:
    """A worker's place among the hosts: its roots, host name and host timeout.

    Args:
        layout: the memory root and the runs root.
        host: this worker's host name in the pinned topology (``None``: not pinned,
            the shared-volume topology).
        host_timeout: how long a pinned host may take to pick up an activity before
            the run fails as "host lost" (its schedule-to-start timeout).
        expected_memory_id: refuse to start unless the memory root carries this id
            (give every worker the same value to catch a wrong or missing mount).
    """

    layout: DataLayout
    host: str | None = None
    host_timeout: timedelta = DEFAULT_HOST_TIMEOUT
    expected_memory_id: str | None = None
    _memory_id: str | None = field(default=None, init=False, repr=False)
    _runs_id: str | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        check_roots(self.layout)
        if self.host is not None:
            check_host_name(self.host)
        if self.host_timeout <= timedelta(0):
            raise ValueError(f"host_timeout must be positive, not {self.host_timeout}")

    @property
    def where(self) -> str:
        host = self.host or f"unpinned worker on {socket.gethostname()}"
        return f"host {host!r} (runs root {self.layout.local_root})"

    # -- start ------------------------------------------------------------------------
    def memory_id(self) -> str:
        """The memory root's id, checked against this runs root's binding on first use."""
        if self._memory_id is None:
            self._memory_id = self.check_start()
        return self._memory_id

    def runs_id(self) -> str:
        """This runs root's id: the same for every worker that shares it."""
        if self._runs_id is None:
            self.check_start()
        assert self._runs_id is not None
        return self._runs_id

    def check_start(self) -> str:
        """Refuse a memory root that is not the one this runs root (and its pipelines)
        used, e.g. an unmounted shared volume showing the empty mount point."""
        layout = self.layout
        binding = _read_json(layout.binding_file)
        bound = binding.get("memory_id") if binding else None
        try:
            current: str | None = layout.memory_id_file.read_text().strip() or None
        except FileNotFoundError:
            current = None
        # An empty mount point has no id: given one here, it is refused, never made up.
        known = (
            f"this host's runs root {layout.local_root} served memory {bound}"
            if bound is not None
            else f"this worker was told its peers use memory {self.expected_memory_id}"
            if self.expected_memory_id is not None
            else None
        )
        if current is None and known is not None:
            raise TopologyMismatch(
                f"memory root {layout.root} has no lw id ({layout.memory_id_file}), but "
                f"{known}: the shared memory volume is probably not mounted at "
                f"{layout.root}. Mount it (or point --memory-root at it) and start again. "
                + TOPOLOGY_OPTIONS
            )
        if current is None:
            publish(layout.memory_id_file, f"{uuid.uuid4()}\n".encode())
            current = layout.memory_id_file.read_text().strip()
        if bound is not None and bound != current:
            raise TopologyMismatch(
                f"memory root {layout.root} has id {current}, but this host's runs root "
                f"{layout.local_root} served memory {bound}: its runs' memory is on "
                "another volume. Point --memory-root at the volume the other workers use, "
                "or give this worker a fresh --runs-root. " + TOPOLOGY_OPTIONS
            )
        if self.expected_memory_id is not None and current != self.expected_memory_id:
            raise TopologyMismatch(
                f"memory root {layout.root} has id {current}, not {self.expected_memory_id} "
                "(the id this worker was told its peers use): mount the shared memory "
                "volume there. " + TOPOLOGY_OPTIONS
            )
        if binding is None:
            # Exclusive: workers sharing this runs root (one volume) share its id.
            body = {"memory_id": current, "runs_id": str(uuid.uuid4())}
            publish(layout.binding_file, json.dumps(body).encode())
            binding = _read_json(layout.binding_file) or body
        self._runs_id = str(binding.get("runs_id") or layout.local_root)
        self._memory_id = current
        return current

    # -- placement --------------------------------------------------------------------
    def pin_here(self) -> HostPin:
        """Inside a top-level run's ``lw.settings``: place its tree on this worker's
        runs root (and pin it to its host, if any), marking the run on this disk. A
        run with ancestors gets its place from its parent; asked here (a parent of an
        earlier version), it stays unplaced."""
        info = activity.info()
        try:
            agent_id = parse_workflow_id(info.workflow_id or "")
        except InvalidWorkflowId:
            return HostPin()
        if agent_id.parent is not None:
            return HostPin()
        if self.configured:
            self.check_placement(info.workflow_id or "", agent_id)
        try:
            runs_id = self.runs_id()
        except TopologyMismatch as err:
            raise lw_error(WRONG_TOPOLOGY, f"workflow {info.workflow_id!r}: {err}") from None
        return self.pin(info.task_queue).model_copy(update={"runs_id": runs_id})

    def pin(self, workflow_task_queue: str) -> HostPin:
        return HostPin(
            task_queue=None if self.host is None else host_queue(workflow_task_queue, self.host),
            host=self.host,
            host_timeout_seconds=self.host_timeout.total_seconds(),
        )

    @property
    def configured(self) -> bool:
        """Runs on a root of their own or pinned to a host (else one data dir)."""
        return self.layout.runs_root is not None or self.host is not None

    def _check_tree(self, workflow_id: str, tree: str) -> None:
        """Fail unless ``tree`` (the runs root id the run's tree was placed on) is
        this worker's runs root."""
        try:
            here = self.runs_id()
        except TopologyMismatch as err:
            raise lw_error(WRONG_TOPOLOGY, f"workflow {workflow_id!r}: {err}") from None
        if tree == here:
            return
        holder = f"runs root id {tree}"
        try:
            top = parse_workflow_id(workflow_id)
            while top.parent is not None:
                top = top.parent
            held = _marker_of(self.layout.tree_entry(top))
        except InvalidWorkflowId:
            held = None
        if held is not None and held.get("runs_id") == tree:
            holder = f"host {held.get('host')!r} (runs root {held.get('runs_root')}, id {tree})"
        raise lw_error(
            WRONG_TOPOLOGY,
            f"workflow {workflow_id!r}: this worker ({self.where}, id {here}) does not hold "
            f"the run's scratch: its run tree was placed on {holder}, whose workers have "
            "another disk; running here would see an empty scratch (a step without its "
            "planner's files). " + TOPOLOGY_OPTIONS,
        )

    def check_placement(self, workflow_id: str, agent_id: AgentId, *, local: bool = False) -> None:
        """Fail unless this worker's disk holds the run's scratch.

        A run whose tree says where it was placed (the ``_placement`` header, on every
        activity of an lw agent tree, local ones too) must be on that runs root, in
        every topology. Otherwise the run's marker says it is held here. Without one
        (the run's first activity on this disk), the tree's entry on the shared memory
        root says which runs root its top-level run was first marked on: another one
        means the run (or, for a run with ancestors, the scratch it reads from them) is
        on another host, and running here would see an empty scratch. A run whose tree
        has no entry (its top-level run never ran an lw activity with this memory
        root) is let be."""
        layout = self.layout
        tree = placed_tree()
        if tree is not None:
            self._check_tree(workflow_id, tree)
        if not self.configured or (local and tree is None):
            # One data dir, no host: the tree's place (checked above) is all there is
            # to check; a run that does not say it (a workflow of an earlier version, a
            # stand-in) is taken as the shared-volume topology's, which holds every run.
            # A local activity that does not say it runs beside its workflow task.
            return
        marker = layout.run_marker(agent_id)
        try:
            found = _read_json(marker)
        except TopologyMismatch as err:
            raise lw_error(WRONG_TOPOLOGY, f"workflow {workflow_id!r}: {err}") from None
        if found is None:
            top = agent_id
            while top.parent is not None:
                top = top.parent
            entry = layout.tree_entry(top)
            if top != agent_id and not entry.exists():
                return  # a tree no worker of this memory root started: nothing to check
            try:
                here = {
                    "host": self.host,
                    "runs_id": self.runs_id(),
                    "runs_root": str(layout.local_root),
                    "memory_id": self.memory_id(),
                }
            except TopologyMismatch as err:
                raise lw_error(WRONG_TOPOLOGY, f"workflow {workflow_id!r}: {err}") from None
            if top == agent_id:
                publish(entry, json.dumps(here, sort_keys=True).encode())
            held = _marker_of(entry)
            if held is not None and held.get("runs_id") != here["runs_id"]:
                whose = "the run" if top == agent_id else f"its top-level run {str(top)!r}"
                raise lw_error(
                    WRONG_TOPOLOGY,
                    f"workflow {workflow_id!r}: this worker ({self.where}) does not hold the "
                    f"run's scratch: {whose} lives on host {held.get('host')!r} (runs root "
                    f"{held.get('runs_root')}), and this disk has no marker of the run; "
                    "running here would see an empty scratch. " + TOPOLOGY_OPTIONS,
                )
            found = {**here, "run": str(agent_id)}
            publish(marker, json.dumps(found, sort_keys=True).encode())
        marked = found.get("memory_id")
        if marked is not None and marked != self.memory_id():
            raise lw_error(
                WRONG_TOPOLOGY,
                f"workflow {workflow_id!r}: the run was started with memory root id {marked}, "
                f"but this worker's memory root {layout.root} has id {self.memory_id()}: "
                "its memory writes would land in another copy of the stores. " + TOPOLOGY_OPTIONS,
            )
