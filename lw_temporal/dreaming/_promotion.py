"""Promotion of only what a dream proposed and a reviewer approved.

Nothing the dream's workflow code passes decides what reaches the target's memory:

- **the proposal** is what ``lw.dreaming.propose`` found and saved worker-side, once
  (``.lw/dreaming/<target>/proposals/<dream>/proposal.json``, first write wins): the
  files this dream wrote to its own store, each with the target's version it read.
  What the reviewer is shown (``show``) and what is promoted are that file;
- **the decision** is the ``approve`` update a reviewer's client sent, as the Temporal
  server recorded it in the dream's history (``WorkflowExecutionUpdateAccepted``: its
  input, who approved and which paths). The promote activity gets only the update's id
  and reads the decision from the server; workflow code cannot accept an update that no
  client sent, so it cannot approve for a human or name the approver.

Each approved file is then written compare-and-set against the version the dream read,
and audited with the approver's name.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from .._scope import Scope, StoreKind, StoreRef
from .._topology import publish
from ..errors._kinds import INVALID_REQUEST, NON_RETRYABLE, lw_error
from ..memory._records import ABSENT, Provenance
from ..memory._stores import MemoryStores
from ._bookkeeping import DreamBooks
from ._records import UPDATE_APPROVE, Decision, FileChange, PromotionOutcome


class Dream:
    """The calling dream, from ``activity.info()``: its target, work folder, books."""

    def __init__(self, scope: Scope, stores: MemoryStores) -> None:
        assert scope.agent_id.definition_id is not None
        self.scope = scope
        self.target = scope.agent_id.definition_id
        self.workflow_id = scope.workflow_id
        self.work = scope.own_scratch / "dream"
        self.runs_dir = scope.own_scratch / "runs"
        self.books = DreamBooks(scope.layout, self.target)
        self.own = StoreRef(StoreKind.DREAMING, self.target)
        self.target_store = StoreRef(StoreKind.WORKFLOW, self.target)
        self.stores = stores

    def inputs(self, batch: int) -> Path:
        return self.work / "inputs" / f"{batch:06d}.json"

    def batch_file(self, batch: int) -> Path:
        return self.work / "batches" / f"{batch:06d}.jsonl"

    def provenance(self, index: int, actor: str | None = None) -> Provenance:
        """The activity's provenance, made distinct per file: the stores keep one
        exactly-once record per activity and store, and one activity writes several."""
        provenance = Provenance.from_activity(self.scope, actor=actor)
        return provenance.model_copy(update={"activity_id": f"{provenance.activity_id}#{index}"})

    # -- the saved proposal ------------------------------------------------------------
    @property
    def proposal_file(self) -> Path:
        return self.books.proposal(self.workflow_id) / "proposal.json"

    def save_proposal(self, changes: tuple[FileChange, ...]) -> tuple[FileChange, ...]:
        """Keep ``changes`` as this dream's proposal unless one is kept already (a
        retry, or a second call): the proposal a reviewer sees never changes."""
        body = json.dumps([c.model_dump(mode="json") for c in changes]).encode()
        self.proposal_file.parent.mkdir(parents=True, exist_ok=True)
        publish(self.proposal_file, body)
        saved = self.proposal()
        return changes if saved is None else saved

    def proposal(self) -> tuple[FileChange, ...] | None:
        try:
            data = json.loads(self.proposal_file.read_bytes())
        except FileNotFoundError:
            return None
        return tuple(FileChange.model_validate(c) for c in data)

    def saved_proposal(self) -> tuple[FileChange, ...]:
        saved = self.proposal()
        if saved is None:
            raise lw_error(
                INVALID_REQUEST,
                f"dream {self.workflow_id!r} has no saved proposal ({self.proposal_file}): it "
                "was proposed by an earlier version of lw, or never; reject it and let the "
                "next dream propose again",
            )
        return saved


async def recorded_decision(
    client: Client, workflow_id: str, run_id: str, update_id: str
) -> Decision:
    """The ``approve`` decision the server recorded for ``update_id`` in the dream's
    history; refuses non-retryably when there is none (workflow code asked to promote
    without a reviewer's update)."""
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    seen = 0
    async for event in handle.fetch_history_events():
        seen += 1
        if seen % 500 == 0:
            activity.heartbeat({"events_read": seen})
        if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            continue
        request = event.workflow_execution_update_accepted_event_attributes.accepted_request
        if request.meta.update_id != update_id or request.input.name != UPDATE_APPROVE:
            continue
        payloads = list(request.input.args.payloads)
        if len(payloads) != 1:
            break
        (decision,) = await client.data_converter.decode(payloads, [Decision])
        if isinstance(decision, Decision):
            return decision
        break
    raise lw_error(
        INVALID_REQUEST,
        f"dream {workflow_id!r}: no approval {update_id!r} was sent to it; only a reviewer's "
        f"{UPDATE_APPROVE!r} update (lw-temporal dream approve) promotes a proposal",
    )


async def promote(
    dream: Dream, proposal: tuple[FileChange, ...], decision: Decision
) -> PromotionOutcome:
    """Copy the approved changes of ``proposal`` into the target, each compare-and-set
    against the version the dream read. Any conflict writes nothing and is reported."""
    stores = dream.stores
    by_path = {c.path: c for c in proposal}
    only = tuple(dict.fromkeys(decision.only))  # a path given twice is promoted once
    unknown = [p for p in only if p not in by_path]
    if unknown:
        return PromotionOutcome(
            conflicts=tuple(
                f"{p}: not a change of {dream.workflow_id} (its changes: "
                f"{', '.join(by_path) or 'none'})"
                for p in unknown
            )
        )
    chosen = [by_path[p] for p in only] if only else list(proposal)
    dropped = tuple(p for p in by_path if only and p not in only)
    plan: list[tuple[int, FileChange, bytes | None]] = []
    conflicts: list[str] = []
    for change in chosen:
        index = list(by_path).index(change.path)
        provenance = dream.provenance(index, actor=decision.who)
        if stores.recorded(dream.target_store, provenance) is not None:
            plan.append((index, change, None))  # promoted by an earlier attempt
            continue
        current = await asyncio.to_thread(stores.read, dream.target_store, change.path)
        if current.content_sha256 != change.base_sha256:
            seen = current.content_sha256[:12] if current.content_sha256 else "absent"
            read = change.base_sha256[:12] if change.base_sha256 else "absent"
            conflicts.append(
                f"{dream.target_store}:{change.path} changed since {dream.workflow_id} "
                f"read it (read {read}, now {seen}); approve the other paths with --only, "
                "or reject and let the next dream read the new version"
            )
            continue
        content = stores.blob(dream.own, change.sha256)
        if content is None:
            conflicts.append(
                f"{change.path}: the proposed version is no longer kept in dreaming's store"
            )
            continue
        plan.append((index, change, content))
    if conflicts:
        return PromotionOutcome(conflicts=tuple(conflicts))
    promoted: list[str] = []
    for index, change, content in plan:
        if content is not None:
            try:
                await asyncio.to_thread(
                    stores.write,
                    dream.target_store,
                    change.path,
                    content,
                    provenance=dream.provenance(index, actor=decision.who),
                    if_sha256=change.base_sha256 or ABSENT,
                )
            except ApplicationError as err:
                if err.type not in NON_RETRYABLE:
                    raise
                conflicts.append(f"{dream.target_store}:{change.path}: {err.message}")
                continue
        promoted.append(change.path)
    if not conflicts:
        dream.books.adopt_state(dream.workflow_id)
    return PromotionOutcome(promoted=tuple(promoted), dropped=dropped, conflicts=tuple(conflicts))
