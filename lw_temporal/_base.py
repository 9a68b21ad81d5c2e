"""The one base of the package's requests, results and records.

Frozen because these values cross Temporal (workflow inputs, activity arguments and
results) and are compared and hashed; a value that changed after it was sent would
make replay see something other than what the history holds. Extra fields are refused
so that a misspelt field name fails where it is written instead of being dropped.

Models that workflow code mutates as it runs (the agent loop's carried state, the
conversation's wire types) stay plain ``BaseModel``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class FrozenModel(BaseModel):
    """Immutable, and strict about field names."""

    model_config = ConfigDict(frozen=True, extra="forbid")
