"""What a dream passes around: its input, state and result, the activities' requests
and results, and the records extracted from run histories.

Pure data, so workflow code imports this module and nothing else of the package.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum

from pydantic import Field, field_validator

from .._base import FrozenModel

DREAM_FIND_RUNS = "lw.dreaming.find_runs"
DREAM_EXTRACT = "lw.dreaming.extract"
DREAM_CONSOLIDATE = "lw.dreaming.consolidate"
DREAM_PROPOSE = "lw.dreaming.propose"
DREAM_PROMOTE = "lw.dreaming.promote"
DREAM_RELEASE = "lw.dreaming.release"
DREAM_SHOW = "lw.dreaming.show"

UPDATE_APPROVE = "approve"
UPDATE_REJECT = "reject"
UPDATE_SHOW = "show"
QUERY_STATE = "state"

#: The token scheduled dreams start with; the Schedule appends ``-<time>``.
SCHEDULED_TOKEN = "scheduled"

# Bounds that keep one run's record, and so every batch file, finite.
MAX_TEXT = 2_000
MAX_COMMAND = 300
MAX_ITEMS_PER_RUN = 2_000
MAX_CHILDREN = 1_000
#: Files one proposal may change (a dream writing more is refused with a count).
MAX_CHANGES = 200
#: Source runs listed per changed file.
MAX_SOURCES = 20


# -- workflow input, state and result ---------------------------------------------------


_CLOSED_STATUSES = frozenset(
    {"Completed", "Failed", "TimedOut", "Terminated", "Canceled", "ContinuedAsNew"}
)


class DreamOptions(FrozenModel):
    """How much one dream reads and how long it waits for a reviewer."""

    max_runs: int = Field(default=500, gt=0, le=100_000)
    batch_size: int = Field(default=50, gt=0, le=1_000)
    approval_timeout: timedelta = timedelta(days=7)
    #: Visibility statuses of the target's runs worth learning from.
    statuses: tuple[str, ...] = Field(default=("Completed", "Failed"), min_length=1)
    #: Lower bound on close time for the target's first dream; later dreams start
    #: from the target's cursor.
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


class DreamInput(FrozenModel):
    """The ``lw.Dreaming`` workflow's input: the definition id whose runs to
    consolidate, and how."""

    target: str
    options: DreamOptions = DreamOptions()


class Cursor(FrozenModel):
    """Where the target's dreams stand: the newest close time claimed, the runs that
    closed at exactly that time (so a tie is neither skipped nor read twice), and how
    far into the target store's audit log the runs' bash-made changes were read.

    Kept in ``<dataDir>/.lw/dreaming/<target>/cursor.json``, never in a note.
    """

    close_time: datetime | None = None
    workflow_ids: tuple[str, ...] = ()
    audit_offset: int = Field(default=0, ge=0)


class FileChange(FrozenModel):
    """One file of a proposal: the target file it replaces (``base_sha256``, the
    version the dream read, ``None`` when absent) and the proposed content (a version
    of dreaming's own store), with the runs it came from."""

    path: str
    base_sha256: str | None
    sha256: str
    bytes: int
    #: Workflow IDs of the runs the note came from (capped; ``sources_count`` is all).
    sources: tuple[str, ...] = ()
    sources_count: int = 0


class Decision(FrozenModel):
    """A reviewer's approval or rejection of a proposal: who, why, and which paths."""

    who: str = Field(min_length=1, max_length=200)
    why: str = Field(default="", max_length=2_000)
    #: Target paths to promote; empty promotes every change of the proposal.
    only: tuple[str, ...] = Field(default=(), max_length=MAX_CHANGES)


class PromotionOutcome(FrozenModel):
    """What an approval wrote to the target's memory, and what it could not."""

    promoted: tuple[str, ...] = ()
    #: Changes the reviewer left out (``approve --only``): never written.
    dropped: tuple[str, ...] = ()
    #: Why nothing was promoted: a target file changed since the dream read it, or a
    #: path the proposal does not hold. The dream keeps waiting for a decision.
    conflicts: tuple[str, ...] = ()


class DreamStatus(StrEnum):
    """Where a dream stands, from collecting runs to a reviewer's decision."""

    COLLECTING = "collecting"
    DREAMING = "dreaming"
    CONSOLIDATING = "consolidating"
    AWAITING_APPROVAL = "awaiting-approval"
    PROMOTING = "promoting"
    APPROVED = "approved"
    REJECTED = "rejected"
    TIMED_OUT = "timed-out"
    NOTHING_NEW = "nothing-new"
    #: Listing only: the dream runs but no worker answered its state query.
    UNREACHABLE = "unreachable"
    #: Listing only: the dream's workflow failed (``DreamState.failure`` says why).
    FAILED = "failed"


class DreamResult(FrozenModel):
    """A finished dream: how many runs it read, what it proposed, what the reviewer
    decided and what was promoted."""

    target: str
    status: DreamStatus
    runs: int = 0
    #: Whether the notes were written by the dreaming agent (a model) or by the
    #: worker's model-free consolidator.
    agent: bool = False
    changes: tuple[FileChange, ...] = ()
    changes_count: int = 0
    decision: Decision | None = None
    promotion: PromotionOutcome | None = None

    def state(self, workflow_id: str, approval_deadline: datetime | None = None) -> DreamState:
        """This outcome as a listing shows it (a finished dream, or a running one so far)."""
        return DreamState(
            workflow_id=workflow_id, approval_deadline=approval_deadline, **dict(self)
        )


class DreamState(DreamResult):
    """A dream as its state query answers it (``lw-temporal dream list|show``): its
    outcome so far, which workflow it is and until when it waits for a reviewer."""

    workflow_id: str
    approval_deadline: datetime | None = None
    #: Listing only: why the dream's workflow failed, when it did.
    failure: str | None = None


class ShowResult(FrozenModel):
    """A proposal as the reviewer reads it: a unified diff per file (bounded; the
    whole text is in ``path``, in the data dir's bookkeeping)."""

    text: str
    truncated: bool = False
    path: str = ""


# -- activity requests and results ------------------------------------------------------


class FindRunsRequest(FrozenModel):
    max_runs: int
    batch_size: int
    statuses: tuple[str, ...]
    since: datetime | None = None


class FindRunsResult(FrozenModel):
    runs: int
    batches: int
    #: The worker has a model: the dreaming agent writes the notes.
    agent: bool = False


class ExtractRequest(FrozenModel):
    batch: int = Field(ge=0)
    batch_size: int = Field(gt=0)


class ExtractResult(FrozenModel):
    runs: int
    commands: int
    failures: int
    memory_ops: int


class ConsolidateRequest(FrozenModel):
    batches: int = Field(ge=0)


class ConsolidateResult(FrozenModel):
    runs: int
    notes: int


class ProposeRequest(FrozenModel):
    batches: int = Field(ge=0)


class ProposeResult(FrozenModel):
    changes: tuple[FileChange, ...]
    changes_count: int


class PromoteRequest(FrozenModel):
    """Which reviewer's ``approve`` update to carry out: the decision itself is read
    from the dream's history on the server, the changes from the saved proposal."""

    update_id: str = Field(min_length=1, max_length=1_000)


class ReleaseRequest(FrozenModel):
    batches: int = Field(ge=0)


class ShowRequest(FrozenModel):
    """How much of the saved proposal's diff to return."""

    max_bytes: int = Field(default=64 * 1024, gt=0, le=1024 * 1024)


# -- what the consolidator sees ------------------------------------------------------------


class CommandRecord(FrozenModel):
    """One bash command a run's agent ran, with how it ended (``rejection`` when it was
    refused before running)."""

    command: str
    exit_code: int | None = None
    rejection: str | None = None


class FailureRecord(FrozenModel):
    """A failed activity or child workflow of the run, with its message."""

    #: ``activity:<type>`` or ``workflow:<type>``.
    source: str
    message: str


class MemoryOpRecord(FrozenModel):
    """One memory operation of the run (a tool call or a bash-made change), with the
    content it wrote, cut to a bounded length."""

    op: str
    path: str | None = None
    content: str | None = None
    store: str | None = None


class RunRecord(FrozenModel):
    """What one finished run did, extracted from its history and its steps' histories."""

    workflow_id: str
    run_id: str
    status: str
    close_time: datetime | None
    #: The run's task and its final summary (bounded), when its history has them.
    task: str | None = None
    summary: str | None = None
    tool_calls: int = 0
    commands: tuple[CommandRecord, ...] = ()
    failures: tuple[FailureRecord, ...] = ()
    memory_ops: tuple[MemoryOpRecord, ...] = ()
    truncated: bool = False
