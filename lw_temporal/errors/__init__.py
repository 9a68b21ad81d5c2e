"""The failure kinds: the ``type`` of every ``ApplicationError`` the library raises.

Branch on ``err.type`` (or list kinds in a ``RetryPolicy``'s
``non_retryable_error_types``); the message says which workflow, run and path failed
and what to change. ``NON_RETRYABLE`` holds every kind a retry cannot fix; the library
raises those with ``non_retryable=True``.

Input and hierarchy:

- ``INVALID_WORKFLOW_ID``: a workflow ID outside the grammar of ``lw_temporal.ids``.
- ``UNKNOWN_DEFINITION``: a definition id the worker's plugin does not register.
- ``INVALID_REQUEST``: a request or input that fails its model's validation.
- ``HIERARCHY_VIOLATION``: a workflow started by another than the parent its ID names.
- ``TURN_LIMIT``: an agent used up its ``max_turns`` (or its tree's ``max_tree_turns``)
  without finishing.
- ``UNVERIFIED_CALLER``: the server does not confirm the calling workflow's type, task
  queue or parent (a workflow of another worker, or a forged run).
- ``WORKFLOW_ID_TAKEN``: the workflow ID already names another run; start under a new ID.

Sandbox and bash:

- ``SANDBOX_UNAVAILABLE``: no sandbox backend works on this host (the message says why).
- ``SANDBOX_FAILED``: the sandbox could not start a command (retried).
- ``PATH_REJECTED``: a command or path reaches outside the agent's view.

Memory:

- ``MEMORY_CONFLICT``: ``if_sha256`` did not match the file's current content.
- ``MEMORY_NOT_FOUND``: the path does not exist in the store.
- ``MEMORY_READ_ONLY``: the role sees the store read-only.
- ``MEMORY_OUTSIDE_SCOPE``: the path is outside every store the role mounts.
- ``QUOTA_EXCEEDED``: the change would take the store over its ``MemoryQuota``.
- ``SCAN_BLOCKED``: the scanner found content (a secret) it blocks.
- ``MEMORY_COMMIT_FAILED``: writing a command's changes to the store failed.
- ``MEMORY_BUSY``: the store's lock stayed held past the wait limit (retried).
- ``MEMORY_SEARCH_UNAVAILABLE``: memory search needs SQLite's FTS5, which this
  worker's Python lacks.

Models:

- ``MODEL_NOT_CONFIGURED``: the worker has no model for an agent that needs one.
- ``MODEL_FAILED``: the model call failed for a reason the adapter did not classify.
- ``MODEL_AUTH``, ``MODEL_INVALID_REQUEST``, ``MODEL_CONTEXT_OVERFLOW``,
  ``MODEL_REFUSED``, ``MODEL_OUTPUT_LIMIT``: the provider cannot take this request.
- ``MODEL_RATE_LIMITED``, ``MODEL_UNAVAILABLE``: retried after the provider's retry-after.
- ``CONVERSATION_MISSING``: a run's worker-side conversation is gone; it is rebuilt.

Topology:

- ``WRONG_TOPOLOGY``: an activity of a run whose scratch is on another host.
- ``HOST_LOST``: a pinned run's host stopped picking up its activities.

Approvals:

- ``APPROVAL_REFUSED``: a decision on an approval request that cannot apply (unknown
  or already decided request, a decider the rule does not accept, a denial without why).
"""

from ._kinds import (
    APPROVAL_REFUSED,
    CONVERSATION_MISSING,
    HIERARCHY_VIOLATION,
    HOST_LOST,
    INVALID_REQUEST,
    INVALID_WORKFLOW_ID,
    MEMORY_BUSY,
    MEMORY_COMMIT_FAILED,
    MEMORY_CONFLICT,
    MEMORY_NOT_FOUND,
    MEMORY_OUTSIDE_SCOPE,
    MEMORY_READ_ONLY,
    MEMORY_SEARCH_UNAVAILABLE,
    MODEL_AUTH,
    MODEL_CONTEXT_OVERFLOW,
    MODEL_FAILED,
    MODEL_INVALID_REQUEST,
    MODEL_NOT_CONFIGURED,
    MODEL_OUTPUT_LIMIT,
    MODEL_RATE_LIMITED,
    MODEL_REFUSED,
    MODEL_UNAVAILABLE,
    NON_RETRYABLE,
    PATH_REJECTED,
    QUOTA_EXCEEDED,
    SANDBOX_FAILED,
    SANDBOX_UNAVAILABLE,
    SCAN_BLOCKED,
    TURN_LIMIT,
    UNKNOWN_DEFINITION,
    UNVERIFIED_CALLER,
    WORKFLOW_ID_TAKEN,
    WRONG_TOPOLOGY,
)

__all__ = [
    "APPROVAL_REFUSED",
    "CONVERSATION_MISSING",
    "HIERARCHY_VIOLATION",
    "HOST_LOST",
    "INVALID_REQUEST",
    "INVALID_WORKFLOW_ID",
    "MEMORY_BUSY",
    "MEMORY_COMMIT_FAILED",
    "MEMORY_CONFLICT",
    "MEMORY_NOT_FOUND",
    "MEMORY_OUTSIDE_SCOPE",
    "MEMORY_READ_ONLY",
    "MEMORY_SEARCH_UNAVAILABLE",
    "MODEL_AUTH",
    "MODEL_CONTEXT_OVERFLOW",
    "MODEL_FAILED",
    "MODEL_INVALID_REQUEST",
    "MODEL_NOT_CONFIGURED",
    "MODEL_OUTPUT_LIMIT",
    "MODEL_RATE_LIMITED",
    "MODEL_REFUSED",
    "MODEL_UNAVAILABLE",
    "NON_RETRYABLE",
    "PATH_REJECTED",
    "QUOTA_EXCEEDED",
    "SANDBOX_FAILED",
    "SANDBOX_UNAVAILABLE",
    "SCAN_BLOCKED",
    "TURN_LIMIT",
    "UNKNOWN_DEFINITION",
    "UNVERIFIED_CALLER",
    "WORKFLOW_ID_TAKEN",
    "WRONG_TOPOLOGY",
]
