"""Activities that verify their caller, and one run per workflow ID.

An activity's scope comes from ``activity.info()`` (the calling workflow's ID and
type), and anyone with client access to the namespace can run a worker of their own
on a task queue of their own, with a workflow *named* ``lw.Worker`` started under any
ID, that schedules ``lw.bash`` on the lw queue. The workflow code that checks a run's
parent is then the attacker's, not ours. So before an lw activity acts with a scope,
it asks the Temporal server about the calling run (``describe``, once per run and
cached by ``(workflow id, run id)``):

- the run is of the workflow type it claims;
- it runs on a task queue this deployment serves (the queue the activity came from,
  its base queue when that is this host's ``<queue>@<host>``, and every queue a worker
  of this plugin polls): a workflow on an attacker's queue runs the attacker's code;
- it has the parent its ID says it has, and that parent passes the same checks, up to
  the top of the tree (a real step under a forged planner is refused too);
- the first run of its continue-as-new chain passed them as well (a forged run cannot
  continue-as-new into a real one with a state of its making);
- its chain owns the workflow ID: the first chain that acted under an ID owns it (a
  record on the memory root, ``.lw/owners/``), and a later chain under the same ID,
  whatever ID reuse policy its client chose, is refused with ``LwWorkflowIdTaken``
  instead of reading and writing the earlier run's scratch.

Anything else fails non-retryably with ``LwUnverifiedCaller``. What stays true: a
client that polls the lw task queue itself *is* a worker of this deployment (Temporal
does not authenticate pollers); task queue permissions on the server are the wall there.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from temporalio import activity
from temporalio.client import Client, WorkflowExecutionDescription
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from ._ids import AgentId, DataLayout, InvalidWorkflowId, parse_workflow_id
from ._topology import host_queue, publish
from ._vouch import Vouched, VouchKey, vouched
from .errors._kinds import UNVERIFIED_CALLER, WORKFLOW_ID_TAKEN, lw_error

#: Runs whose verification is remembered (each costs one describe when forgotten).
VERIFIED_CACHE = 4096

_Key = tuple[str, str]


def owner_file(layout: DataLayout, workflow_id: str) -> Path:
    """Where the run chain that owns ``workflow_id`` is recorded (never mounted)."""
    digest = hashlib.sha256(workflow_id.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return layout.state / "owners" / f"{digest}.json"


def owner_of(layout: DataLayout, workflow_id: str) -> str | None:
    """The first run id of the chain that owns ``workflow_id``, if one acted yet."""
    try:
        data = json.loads(owner_file(layout, workflow_id).read_bytes())
    except (FileNotFoundError, ValueError):
        return None
    chain = data.get("chain") if isinstance(data, dict) else None
    return chain if isinstance(chain, str) else None


def taken(workflow_id: str, owner: str, chain: str) -> Exception:
    return lw_error(
        WORKFLOW_ID_TAKEN,
        f"workflow ID {workflow_id!r} already names another run (run chain {owner}); this "
        f"run (chain {chain}) may not use its scratch. A workflow ID names one run: start "
        "this one under a new ID (another token, e.g. lw-temporal run --id <new token>)",
    )


def _is_lw_id(workflow_id: str) -> bool:
    try:
        parse_workflow_id(workflow_id)
    except InvalidWorkflowId:
        return False
    return True


@dataclass
class CallerCheck:
    """The caller checks of one worker's activities, shared by every activity-holding
    object (one cache, one set of served queues).

    Args:
        layout: where ownership records live (the memory root's bookkeeping).
        host: this worker's host in the pinned topology: ``<queue>@<host>`` serves
            the workflows of ``<queue>``.
        enabled: ``False`` only to measure what the checks cost (benchmarks).
    """

    layout: DataLayout
    host: str | None = None
    enabled: bool = True
    _served: set[str] = field(default_factory=set, init=False, repr=False)
    _verified: OrderedDict[_Key, str] = field(default_factory=OrderedDict, init=False, repr=False)
    _pending: dict[_Key, asyncio.Task[str]] = field(default_factory=dict, init=False, repr=False)
    _owned: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    #: Describes sent so far (what the checks cost the server; benchmarks read it).
    describes: int = field(default=0, init=False)
    #: The key of the stamps this deployment's workflows put on their activities.
    vouch_key: VouchKey = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.vouch_key = VouchKey(self.layout.state)

    def serve(self, task_queue: str) -> None:
        """A task queue a worker of this plugin polls: its workflows are ours."""
        self._served.add(task_queue)
        if self.host is not None:
            self._served.add(host_queue(task_queue, self.host))

    def serves(self, task_queue: str, activity_queue: str) -> bool:
        if task_queue in self._served or task_queue == activity_queue:
            return True
        suffix = f"@{self.host}" if self.host is not None else None
        return (
            suffix is not None
            and activity_queue.endswith(suffix)
            and (task_queue == activity_queue.removesuffix(suffix))
        )

    # -- the calling run ------------------------------------------------------------------
    async def verify(
        self, agent_id: AgentId, *, chain: str | None = None, parent_run: str | None = None
    ) -> None:
        """Refuse unless the calling run is confirmed as ``agent_id`` and its chain owns
        the ID (call inside an activity whose scope is ``agent_id``'s).

        A regular activity's caller is described by the server. A local activity's
        workflow task came from this worker (its type and queue are this worker's own)
        and its input was made by that workflow's code here, so it passes what the
        workflow knows from the server instead (``chain``: its first run id;
        ``parent_run``: its parent's run id, whose ID the workflow checked at start):
        no describe of the run itself, only of a parent not yet confirmed."""
        if not self.enabled:
            return
        info = activity.info()
        run_id = info.workflow_run_id or ""
        key = (str(agent_id), run_id)
        if key in self._verified:
            self._verified.move_to_end(key)
            return
        client, claimed, queue = activity.client(), info.workflow_type or "", info.task_queue
        check: Callable[[], Awaitable[str]]
        stamp = None if info.is_local else vouched(self.vouch_key.key)
        if info.is_local and chain is not None:
            check = partial(self._check_local, client, agent_id, run_id, claimed, queue, chain,
                            parent_run)  # fmt: skip
        elif stamp is not None:
            check = partial(self._check_vouched, client, agent_id, run_id, claimed, queue, stamp)
        else:
            check = partial(self._check, client, agent_id, run_id, claimed, queue)
        await self._once(key, check)

    async def verify_workflow(self, workflow_type: str) -> None:
        """For an activity of a workflow outside the ID grammar (retention): the
        server confirms its type and that it runs on a queue this deployment serves."""
        if not self.enabled:
            return
        info = activity.info()
        workflow_id, run_id = info.workflow_id or "", info.workflow_run_id or ""
        if (workflow_id, run_id) in self._verified:
            return
        description = await self._describe(activity.client(), workflow_id, run_id)
        if description.workflow_type != workflow_type or info.workflow_type != workflow_type:
            raise _refused(workflow_id, f"it is a {description.workflow_type}, not {workflow_type}")
        if not self.serves(description.task_queue, info.task_queue):
            raise _refused(workflow_id, _foreign_queue(description.task_queue))
        self._remember((workflow_id, run_id), run_id)

    async def _once(self, key: _Key, check: Callable[[], Awaitable[str]]) -> str:
        """One verification per run at a time: concurrent activities of a run share it."""
        if key in self._verified:
            return self._verified[key]
        task = self._pending.get(key)
        if task is None:
            task = asyncio.ensure_future(check())
            self._pending[key] = task
            task.add_done_callback(lambda _t: self._pending.pop(key, None))
        return await asyncio.shield(task)

    async def _ancestor(self, client: Client, agent_id: AgentId, run_id: str, queue: str) -> str:
        claimed = agent_id.workflow_type
        return await self._once(
            (str(agent_id), run_id),
            lambda: self._check(client, agent_id, run_id, claimed, queue),
        )

    async def _check(
        self,
        client: Client,
        agent_id: AgentId,
        run_id: str,
        claimed: str,
        queue: str,
    ) -> str:
        """The server's word on a run: its type, queue, parent (recursively) and chain."""
        workflow_id = str(agent_id)
        description = await self._describe(client, workflow_id, run_id)
        if description.workflow_type != claimed or claimed != agent_id.workflow_type:
            raise _refused(
                workflow_id,
                f"the server has it as a {description.workflow_type}, its ID names a "
                f"{agent_id.workflow_type}",
            )
        if not self.serves(description.task_queue, queue):
            raise _refused(workflow_id, _foreign_queue(description.task_queue))
        parent, parent_run = description.parent_id, description.parent_run_id
        await self._parent_is(client, agent_id, parent, parent_run, queue)
        chain = description.raw_description.workflow_execution_info.first_run_id or run_id
        return await self._owned_by(client, agent_id, run_id, chain, claimed, queue)

    async def _parent_is(
        self,
        client: Client,
        agent_id: AgentId,
        parent: str | None,
        parent_run: str | None,
        queue: str,
    ) -> None:
        """The run's parent (as the server has it) is the one its ID names, and passes."""
        workflow_id, expected = str(agent_id), agent_id.parent
        if expected is None:
            if parent is not None and _is_lw_id(parent):
                raise _refused(workflow_id, f"a top-level ID was started by lw run {parent!r}")
        elif parent != str(expected) or not parent_run:
            started_by = f"by {parent!r}" if parent else "by a client"
            raise _refused(
                workflow_id, f"it was started {started_by}, but its ID places it under {expected}"
            )
        else:
            await self._ancestor(client, expected, parent_run, queue)

    async def _check_vouched(
        self,
        client: Client,
        agent_id: AgentId,
        run_id: str,
        claimed: str,
        queue: str,
        stamp: Vouched,
    ) -> str:
        """A regular activity whose run a worker of this deployment vouched for
        (``_vouch``): its type, chain and parent are the server's, as that worker saw
        them, so only the parent is described (once per parent)."""
        if claimed != agent_id.workflow_type:
            raise _refused(
                str(agent_id), f"it runs as a {claimed}, its ID names a {agent_id.workflow_type}"
            )
        await self._parent_is(client, agent_id, stamp.parent, stamp.parent_run, queue)
        return await self._owned_by(client, agent_id, run_id, stamp.chain, claimed, queue)

    async def _check_local(
        self,
        client: Client,
        agent_id: AgentId,
        run_id: str,
        claimed: str,
        queue: str,
        chain: str,
        parent_run: str | None,
    ) -> str:
        """A local activity's run, from what its own workflow passed (see verify)."""
        expected = agent_id.parent
        if expected is not None:
            if not parent_run:
                raise _refused(
                    str(agent_id), f"its ID places it under {expected}, no parent ran it"
                )
            await self._ancestor(client, expected, parent_run, queue)
        return await self._owned_by(client, agent_id, run_id, chain, claimed, queue)

    async def _owned_by(
        self, client: Client, agent_id: AgentId, run_id: str, chain: str, claimed: str, queue: str
    ) -> str:
        """The run's chain owns its ID: recorded already, or claimed now (after the
        chain's first run, which made this run's input, passes as ours)."""
        workflow_id = str(agent_id)
        owner = self._owner(workflow_id)
        if owner is not None and owner != chain:
            raise taken(workflow_id, owner, chain)
        if owner is None:
            if chain != run_id:
                first = await self._describe(client, workflow_id, chain)
                if first.workflow_type != claimed or not self.serves(first.task_queue, queue):
                    raise _refused(
                        workflow_id,
                        f"it continues run {chain}, a {first.workflow_type} on task queue "
                        f"{first.task_queue!r} this deployment does not serve",
                    )
            await asyncio.to_thread(self._claim, workflow_id, chain)
        self._remember((workflow_id, run_id), chain)
        return chain

    async def ran_here(
        self, client: Client, workflow_id: str, run_id: str, task_queue: str, activity_queue: str
    ) -> bool:
        """Whether a closed run is one this deployment ran, for readers of histories
        (dreaming): its chain owns its ID, or, for a run that never passed a caller
        check (no record), it ran on a queue this deployment serves and, when its ID
        places it under a parent, the server has it started by that parent, which ran
        here too. A forged run on another queue, a run a client started under another
        tree's ID, or another chain under a taken ID, is not."""
        owner = self._owner(workflow_id)
        if owner is None:
            if not self.serves(task_queue, activity_queue):
                return False
            return await self._started_by_its_parent(client, workflow_id, run_id, activity_queue)
        if run_id == owner:
            return True
        try:
            description = await self._describe(client, workflow_id, run_id)
        except ApplicationError:
            return False
        chain = description.raw_description.workflow_execution_info.first_run_id or run_id
        return chain == owner

    async def _started_by_its_parent(
        self, client: Client, workflow_id: str, run_id: str, activity_queue: str
    ) -> bool:
        try:
            expected = parse_workflow_id(workflow_id).parent
        except InvalidWorkflowId:
            return True  # outside the grammar: no parent to have (retention)
        if expected is None:
            return True
        try:
            description = await self._describe(client, workflow_id, run_id)
            if description.parent_id != str(expected) or not description.parent_run_id:
                return False  # started by a client (or another run) under a child's ID
            parent_run = description.parent_run_id
            parent = await self._describe(client, str(expected), parent_run)
        except ApplicationError:
            return False
        return await self.ran_here(
            client, str(expected), parent_run, parent.task_queue, activity_queue
        )

    # -- one run per workflow ID -------------------------------------------------------
    def _owner(self, workflow_id: str) -> str | None:
        owner = self._owned.get(workflow_id)
        if owner is None:
            owner = owner_of(self.layout, workflow_id)
            if owner is not None:
                self._owned[workflow_id] = owner
        return owner

    def _claim(self, workflow_id: str, chain: str) -> None:
        """Record ``chain`` as the ID's owner unless another chain is (first wins)."""
        path = owner_file(self.layout, workflow_id)
        body = json.dumps({"workflow_id": workflow_id, "chain": chain}, sort_keys=True)
        # No fsync (a few ms on the run's first activity, as for run manifests): a
        # record lost to a power cut is claimed again by the chain's next activity.
        publish(path, body.encode(), sync=False)
        owner = owner_of(self.layout, workflow_id)
        if owner is None:
            raise lw_error(
                UNVERIFIED_CALLER,
                f"workflow {workflow_id!r}: its ownership record {path} is unreadable; "
                "remove the damaged file and run again",
            )
        if owner != chain:
            raise taken(workflow_id, owner, chain)
        if len(self._owned) >= VERIFIED_CACHE:
            self._owned.clear()
        self._owned[workflow_id] = owner

    async def _describe(
        self, client: Client, workflow_id: str, run_id: str
    ) -> WorkflowExecutionDescription:
        self.describes += 1
        return await _describe(client, workflow_id, run_id)

    def _remember(self, key: _Key, chain: str) -> None:
        self._verified[key] = chain
        while len(self._verified) > VERIFIED_CACHE:
            self._verified.popitem(last=False)


async def _describe(client: Client, workflow_id: str, run_id: str) -> WorkflowExecutionDescription:
    try:
        return await client.get_workflow_handle(workflow_id, run_id=run_id or None).describe()
    except RPCError as err:
        if err.status is RPCStatusCode.NOT_FOUND:
            why = f"the server knows no run {run_id or '(none)'} of it"
            raise _refused(workflow_id, why) from None
        raise


def _foreign_queue(task_queue: str) -> str:
    return (
        f"it runs on task queue {task_queue!r}, which no worker of this deployment serves "
        "(a workflow of another worker)"
    )


def _refused(workflow_id: str, why: str) -> Exception:
    return lw_error(
        UNVERIFIED_CALLER,
        f"workflow {workflow_id!r} is not the run its ID names: {why}. lw activities act "
        "only for lw workflows this deployment runs; start runs with a client and let the "
        "lw workers run them (README, 'What namespace access grants')",
    )
