"""Typed failure kinds.

Every failure the library raises to Temporal is an ``ApplicationError`` whose ``type`` is
one of these constants, so callers can branch on the kind and retry policies can list
the kinds that a retry cannot fix. Messages say which workflow, which path, and what to
change.
"""

from __future__ import annotations

from temporalio.exceptions import ApplicationError

INVALID_WORKFLOW_ID = "LwInvalidWorkflowId"
UNKNOWN_DEFINITION = "LwUnknownDefinition"
INVALID_REQUEST = "LwInvalidRequest"
SANDBOX_UNAVAILABLE = "LwSandboxUnavailable"
SANDBOX_FAILED = "LwSandboxFailed"
PATH_REJECTED = "LwPathRejected"
MEMORY_CONFLICT = "LwMemoryConflict"
MEMORY_NOT_FOUND = "LwMemoryNotFound"
MEMORY_READ_ONLY = "LwMemoryReadOnly"
MEMORY_OUTSIDE_SCOPE = "LwMemoryOutsideScope"
QUOTA_EXCEEDED = "LwQuotaExceeded"
SCAN_BLOCKED = "LwScanBlocked"
#: Writing a command's memory changes to the store failed (disk full, a path the
#: file system refuses): the command's staging is gone, so a retry cannot help.
MEMORY_COMMIT_FAILED = "LwMemoryCommitFailed"
#: Memory search cannot run on this worker (its Python's SQLite has no FTS5).
MEMORY_SEARCH_UNAVAILABLE = "LwMemorySearchUnavailable"
MODEL_FAILED = "LwModelFailed"
HIERARCHY_VIOLATION = "LwHierarchyViolation"
TURN_LIMIT = "LwTurnLimit"
MODEL_NOT_CONFIGURED = "LwModelNotConfigured"
#: The provider refused or could not take the request: retrying the same one cannot help.
MODEL_AUTH = "LwModelAuth"
MODEL_INVALID_REQUEST = "LwModelInvalidRequest"
MODEL_CONTEXT_OVERFLOW = "LwModelContextOverflow"
MODEL_REFUSED = "LwModelRefused"
MODEL_OUTPUT_LIMIT = "LwModelOutputLimit"
#: The provider is rate limiting or overloaded: retried, after its retry-after.
MODEL_RATE_LIMITED = "LwModelRateLimited"
MODEL_UNAVAILABLE = "LwModelUnavailable"
#: The worker-side conversation files of a run are absent; the workflow resends them.
CONVERSATION_MISSING = "LwConversationMissing"
#: A worker asked to run an activity of a run whose scratch is on another host.
WRONG_TOPOLOGY = "LwWrongTopology"
#: A pinned run's host did not pick up its activity in time (the run fails).
HOST_LOST = "LwHostLost"
#: The Temporal server does not confirm the calling workflow: its type, task queue or
#: parent is not what its workflow ID claims (another worker's workflow, a forged run).
UNVERIFIED_CALLER = "LwUnverifiedCaller"
#: The workflow ID already names another run (another continue-as-new chain): its
#: scratch belongs to that run, so this one must start under a new ID.
WORKFLOW_ID_TAKEN = "LwWorkflowIdTaken"
#: A decision on an approval request that cannot apply (unknown or already decided
#: request, a decider its rule does not accept, a denial without a reason).
APPROVAL_REFUSED = "LwApprovalRefused"

#: Kinds no retry can fix; list them in a RetryPolicy's ``non_retryable_error_types``.
NON_RETRYABLE: tuple[str, ...] = (
    INVALID_WORKFLOW_ID,
    UNKNOWN_DEFINITION,
    INVALID_REQUEST,
    SANDBOX_UNAVAILABLE,
    PATH_REJECTED,
    MEMORY_CONFLICT,
    MEMORY_NOT_FOUND,
    MEMORY_READ_ONLY,
    MEMORY_OUTSIDE_SCOPE,
    QUOTA_EXCEEDED,
    SCAN_BLOCKED,
    MEMORY_COMMIT_FAILED,
    MEMORY_SEARCH_UNAVAILABLE,
    HIERARCHY_VIOLATION,
    TURN_LIMIT,
    MODEL_NOT_CONFIGURED,
    MODEL_AUTH,
    MODEL_INVALID_REQUEST,
    MODEL_CONTEXT_OVERFLOW,
    MODEL_REFUSED,
    MODEL_OUTPUT_LIMIT,
    CONVERSATION_MISSING,
    WRONG_TOPOLOGY,
    HOST_LOST,
    UNVERIFIED_CALLER,
    WORKFLOW_ID_TAKEN,
    APPROVAL_REFUSED,
)


def lw_error(kind: str, message: str, *details: object) -> ApplicationError:
    """An ``ApplicationError`` of ``kind``; non-retryable when the kind is in NON_RETRYABLE."""
    return ApplicationError(message, *details, type=kind, non_retryable=kind in NON_RETRYABLE)


def error_type(err: BaseException) -> str | None:
    """The type of the first typed ``ApplicationError`` down a failure's cause chain.

    What an lw error is, wherever it surfaces: a child's ``LwWrongTopology`` arrives as
    a ``ChildWorkflowError`` caused by it, and an untyped ``ApplicationError`` (a
    wrapper some code put around it) is looked through rather than taken as the answer.
    """
    cause: BaseException | None = err
    while cause is not None:
        if isinstance(cause, ApplicationError) and cause.type:
            return cause.type
        cause = cause.__cause__
    return None


#: A store's lock stayed held past the wait limit; retrying later can succeed.
MEMORY_BUSY = "LwMemoryBusy"
