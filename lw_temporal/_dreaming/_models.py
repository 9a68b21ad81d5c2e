"""What a dream passes around: its input, state and result, the activities' requests
and results, and the records extracted from run histories.

Pure data, so workflow code imports this module and nothing else of the package.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

DREAM_FIND_RUNS = "lw.dreaming.find_runs"
DREAM_EXTRACT = "lw.dreaming.extract"
DREAM_CONSOLIDATE = "lw.dreaming.consolidate"
DREAM_PROMOTE = "lw.dreaming.promote"

UPDATE_APPROVE = "approve"
UPDATE_REJECT = "reject"
QUERY_STATE = "state"

#: The token scheduled dreams start with; the Schedule appends ``-<time>``.
SCHEDULED_TOKEN = "scheduled"

# Bounds that keep one run's record, and so every batch file, finite.
MAX_TEXT = 2_000
MAX_COMMAND = 300
MAX_ITEMS_PER_RUN = 2_000
MAX_CHILDREN = 1_000


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# -- workflow input, state and result ---------------------------------------------------


_CLOSED_STATUSES = frozenset(
    {"Completed", "Failed", "TimedOut", "Terminated", "Canceled", "ContinuedAsNew"}
)


class DreamOptions(_Model):
    """How much one dream reads and how long it waits for a reviewer."""

    max_runs: int = Field(default=500, gt=0, le=100_000)
    batch_size: int = Field(default=50, gt=0, le=1_000)
    approval_timeout: timedelta = timedelta(days=7)
    #: Visibility statuses of the target's runs worth learning from.
    statuses: tuple[str, ...] = Field(default=("Completed", "Failed"), min_length=1)
    #: Lower bound on close time for a dream with no previous completion (a first,
    #: unscheduled dream); later scheduled dreams use the last completion's cursor.
    since: datetime | None = None

    @field_validator("statuses")
    @classmethod
    def _statuses(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(value) - _CLOSED_STATUSES)
        if unknown:
            raise ValueError(
                f"statuses {unknown} are not closed execution statuses; use some of "
                f"{sorted(_CLOSED_STATUSES)}"
            )
        return value


class DreamInput(_Model):
    target: str
    options: DreamOptions = DreamOptions()


class Cursor(_Model):
    """Where the last dream stopped: the newest close time it consumed, and the runs
    that closed at exactly that time (so a tie is neither skipped nor read twice)."""

    close_time: datetime
    workflow_ids: tuple[str, ...] = ()


class NoteRef(_Model):
    """One note a dream wrote: where it is in dreaming's store, where approval copies
    it in the target's store, and the target file's version the dream saw."""

    path: str
    target_path: str
    sha256: str
    base_sha256: str | None
    bytes: int


class Decision(_Model):
    who: str = Field(min_length=1, max_length=200)
    why: str = Field(default="", max_length=2_000)


class PromotionOutcome(_Model):
    promoted: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()


class DreamStatus(StrEnum):
    COLLECTING = "collecting"
    CONSOLIDATING = "consolidating"
    AWAITING_APPROVAL = "awaiting-approval"
    PROMOTING = "promoting"
    APPROVED = "approved"
    REJECTED = "rejected"
    TIMED_OUT = "timed-out"
    NOTHING_NEW = "nothing-new"
    #: Listing only: the dream runs but no worker answered its state query.
    UNREACHABLE = "unreachable"


class DreamState(_Model):
    workflow_id: str
    target: str
    status: DreamStatus
    runs: int = 0
    notes: tuple[NoteRef, ...] = ()
    decision: Decision | None = None
    promotion: PromotionOutcome | None = None
    approval_deadline: datetime | None = None


class DreamResult(_Model):
    target: str
    status: DreamStatus
    #: The cursor the next dream starts from (the Schedule hands it over as the
    #: last completion result).
    cursor: Cursor | None
    runs: int = 0
    notes: tuple[NoteRef, ...] = ()
    decision: Decision | None = None
    promotion: PromotionOutcome | None = None


# -- activity requests and results ------------------------------------------------------


class FindRunsRequest(_Model):
    cursor: Cursor | None
    max_runs: int
    batch_size: int
    statuses: tuple[str, ...]


class FindRunsResult(_Model):
    runs: int
    batches: int
    cursor: Cursor | None


class ExtractRequest(_Model):
    batch: int = Field(ge=0)
    batch_size: int = Field(gt=0)


class ExtractResult(_Model):
    runs: int
    commands: int
    failures: int
    memory_ops: int


class ConsolidateRequest(_Model):
    batches: int = Field(ge=0)


class ConsolidateResult(_Model):
    runs: int
    notes: tuple[NoteRef, ...]


class PromoteRequest(_Model):
    notes: tuple[NoteRef, ...]
    decision: Decision


# -- what the consolidator sees ------------------------------------------------------------


class CommandRecord(_Model):
    command: str
    exit_code: int | None = None
    rejection: str | None = None


class FailureRecord(_Model):
    #: ``activity:<type>`` or ``workflow:<type>``.
    source: str
    message: str


class MemoryOpRecord(_Model):
    op: str
    path: str | None = None
    content: str | None = None
    store: str | None = None


class RunRecord(_Model):
    """What one finished run did, extracted from its history and its steps' histories."""

    workflow_id: str
    run_id: str
    status: str
    close_time: datetime | None
    tool_calls: int = 0
    commands: tuple[CommandRecord, ...] = ()
    failures: tuple[FailureRecord, ...] = ()
    memory_ops: tuple[MemoryOpRecord, ...] = ()
    truncated: bool = False
