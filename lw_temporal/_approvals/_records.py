"""Approval requests, decisions and the book a run keeps of them.

Each travels through Temporal (the ``lw.progress`` answer, the decision update, the
carried state of continue-as-new, the audit activity), so each is bounded: a request
holds the call's arguments as the agent gave them, every string cut to
``ARGUMENT_CHARS`` with the cut said and the whole call's sha256 kept (the call itself
is in the run's conversation, ``turn`` and ``call_id`` name it); the book keeps the
newest ``KEPT_DECISIONS`` decisions and counts the rest.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field, StrictBool, field_validator

from .._base import FrozenModel
from .._ids import Role

#: The update that decides a request, the query-free audit activity, and the prefix of
#: request ids: ``a1-3f9c2e``, ``a2-0b71d4``..., numbered on across continue-as-new, each
#: with a tag the workflow draws from its seeded randomness, which the server reseeds
#: for a run that starts over from earlier state (a workflow reset, a retry): such a
#: run never reuses an id an earlier run gave out, so a decision sent for the request
#: a reviewer saw cannot reach another one, and each request's audit record is its
#: own. (Runs recorded before the tag have ``a1``, ``a2``...)
DECIDE_UPDATE = "lw.approvals.decide"
RECORD_ACTIVITY = "lw.approvals.record"
REQUEST_PREFIX = "a"
REQUEST_TAG_CHARS = 6
REQUEST_ID_PATTERN = rf"^a[1-9][0-9]{{0,8}}(-[0-9a-f]{{{REQUEST_TAG_CHARS}}})?$"

#: Characters of one string argument a request shows; keys of one call it keeps.
ARGUMENT_CHARS = 4096
ARGUMENT_KEYS = 32
#: Decisions a run's book keeps (newest); older ones are counted and stay in the
#: run's audit files.
KEPT_DECISIONS = 20
#: Requests one reply may open; calls past them are refused unrun (the model is told
#: to ask for fewer at a time), so a run's pending requests stay bounded.
REQUESTS_PER_REPLY = 50
#: Characters of a decider's name and reason.
NAME_CHARS = 200
WHY_CHARS = 2000


class Outcome(StrEnum):
    APPROVED = "approved"
    DENIED = "denied"
    #: Nobody decided within the rule's timeout; ``on_timeout`` said what happened.
    TIMED_OUT_DENIED = "timed out (denied)"
    TIMED_OUT_APPROVED = "timed out (approved)"

    @property
    def runs(self) -> bool:
        return self in (Outcome.APPROVED, Outcome.TIMED_OUT_APPROVED)


def _clip(value: Any, cut: list[bool]) -> Any:
    if isinstance(value, str):
        if len(value) > ARGUMENT_CHARS:
            cut.append(True)
            head = value[: ARGUMENT_CHARS * 2 // 3]
            tail = value[-(ARGUMENT_CHARS // 3) :]
            return f"{head}\n...[{len(value)} characters, middle cut]...\n{tail}"
        return value
    if isinstance(value, dict):
        items = list(value.items())
        if len(items) > ARGUMENT_KEYS:
            cut.append(True)
        return {str(k): _clip(v, cut) for k, v in items[:ARGUMENT_KEYS]}
    if isinstance(value, list):
        if len(value) > ARGUMENT_KEYS:
            cut.append(True)
        return [_clip(v, cut) for v in value[:ARGUMENT_KEYS]]
    return value


def shown_arguments(arguments: dict[str, Any]) -> tuple[dict[str, Any], bool, str]:
    """The arguments as a request shows them, whether anything was cut, and the sha256
    of the whole call's canonical JSON (to check against the conversation)."""
    cut: list[bool] = []
    shown = _clip(arguments, cut)
    whole = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    sha = hashlib.sha256(whole.encode("utf-8", "surrogatepass")).hexdigest()
    return shown, bool(cut), sha


class ApprovalRequest(FrozenModel):
    """A tool call waiting for a person: what the agent asked, and under which rule."""

    id: str
    workflow_id: str
    role: Role
    definition_id: str | None
    #: The tool as the model called it, and the action the rule named.
    tool: str
    action: str
    arguments: dict[str, Any]
    arguments_cut: bool = False
    arguments_sha256: str
    #: Where the whole call is: the run's conversation (its first run id), the turn
    #: and the call's id.
    conversation: str = ""
    turn: int
    call_id: str
    rule: str
    approvers: tuple[str, ...] = ()
    requested_at: datetime
    deadline: datetime
    on_timeout: str = "deny"

    def summary(self, limit: int = 160) -> str:
        """The call on one line (for ``approvals list``; escape it before printing)."""
        main = self.arguments.get("command") or self.arguments.get("path")
        if main is None:
            main = self.arguments.get("workflow") or self.arguments.get("task") or ""
        flat = " ".join(str(main).split())
        return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class ApprovalDecision(FrozenModel):
    """What a reviewer sends: the request, approve or deny, who, and why."""

    request_id: str = Field(pattern=REQUEST_ID_PATTERN)
    #: ``true`` or ``false`` only: ``"no"`` or ``0`` is refused, not read as a bool.
    approve: StrictBool
    by: str = Field(min_length=1, max_length=NAME_CHARS)
    why: str = Field(default="", max_length=WHY_CHARS)

    @field_validator("by")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a decision must name who decides (--by NAME)")
        return value.strip()


class ApprovalRecord(FrozenModel):
    """A decided request, as the run's audit keeps it."""

    request: ApprovalRequest
    outcome: Outcome
    by: str
    why: str = ""
    decided_at: datetime

    def result_text(self) -> str:
        """What the model reads for a call that did not run."""
        request = self.request
        if self.outcome is Outcome.DENIED:
            because = f": {self.why}" if self.why else ""
            return (
                f"{request.tool}: not run: a person ({self.by}) denied this call "
                f"(approval {request.id}, rule: {request.rule}){because}"
            )
        return (
            f"{request.tool}: not run: nobody approved this call before its approval timed "
            f"out (approval {request.id}, rule: {request.rule}); ask again only if the task "
            "needs it"
        )


class RecordRequest(FrozenModel):
    """The audit activity's input: one request, pending or decided."""

    request: ApprovalRequest
    record: ApprovalRecord | None = None


class RecordResult(FrozenModel):
    path: str


def split_request_id(request_id: str) -> tuple[int, str]:
    """The number and the tag (``""`` for an untagged id) of a valid request id."""
    number, _, tag = request_id.removeprefix(REQUEST_PREFIX).partition("-")
    return int(number), tag


class ApprovalBook(BaseModel):
    """A run's approvals, carried across continue-as-new: the next id, the requests
    waiting, and the newest decisions."""

    next_id: int = 1
    pending: list[ApprovalRequest] = Field(default_factory=list)
    decided: list[ApprovalRecord] = Field(default_factory=list)
    decided_count: int = 0

    def new_id(self, tag: str = "") -> str:
        request_id = f"{REQUEST_PREFIX}{self.next_id}" + (f"-{tag}" if tag else "")
        self.next_id += 1
        return request_id

    def find_pending(self, request_id: str) -> ApprovalRequest | None:
        return next((r for r in self.pending if r.id == request_id), None)

    def find_decided(self, request_id: str) -> ApprovalRecord | None:
        return next((r for r in self.decided if r.request.id == request_id), None)

    def close(self, record: ApprovalRecord) -> None:
        self.pending = [r for r in self.pending if r.id != record.request.id]
        self.decided = [*self.decided, record][-KEPT_DECISIONS:]
        self.decided_count += 1
