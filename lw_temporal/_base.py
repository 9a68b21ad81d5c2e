"""The one base of the package's requests, results and records.

Frozen because these values cross Temporal (workflow inputs, activity arguments and
results) and are compared and hashed; a value that changed after it was sent would
make replay see something other than what the history holds. Extra fields are refused
so that a misspelt field name fails where it is written instead of being dropped.

Not every model fits: the agent loop's carried state (``_agent._io``) is mutated turn by
turn in workflow code, and the conversation's wire types (``_agent._protocol``) have
their own base that leaves default fields out of the history (``ModelResponse``, which
a user's own ``Model`` builds, ignores fields it does not know).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class FrozenModel(BaseModel):
    """Immutable, and strict about field names."""

    model_config = ConfigDict(frozen=True, extra="forbid")
