"""Humans in the loop: approval rules in definitions, the requests and decisions a run
keeps, by concern: the rules and their matching (``_rules``), what a tool call does
(``_actions``), the records (``_records``), the agent loop's wait and the decision
update (``_gate``), the run's bookkeeping (``_audit``), the bash view of stores a rule
guards (``_bashview``) and the client side (``_client``).

Only the rules and records are imported here: the agent package reads them, and the
gate imports the agent package.
"""

from ._records import (
    DECIDE_UPDATE,
    RECORD_ACTIVITY,
    ApprovalBook,
    ApprovalDecision,
    ApprovalRecord,
    ApprovalRequest,
    Outcome,
)
from ._rules import ApprovalRule

__all__ = [
    "DECIDE_UPDATE",
    "RECORD_ACTIVITY",
    "ApprovalBook",
    "ApprovalDecision",
    "ApprovalRecord",
    "ApprovalRequest",
    "ApprovalRule",
    "Outcome",
]
