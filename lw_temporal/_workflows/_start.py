"""What a run is started with, read so that a start it cannot use fails it.

The SDK decodes a workflow's input before any of its code runs, and an input that does
not validate (``12345``, ``{"task": 5}``, a negative ``turns_per_run``, a dream's input
without ``target``) failed every workflow task after it: the run stayed Running for
ever, its worker logging the same traceback. At run time an agent's input type is
:data:`StartInput`, which takes what validates as an :class:`AgentInput`, a task string
or nothing, in that order, and keeps anything else as :class:`Unreadable`; the loop
fails the run with it, non-retryably and naming the problem. ``lw.Dreaming``'s input and
the approval update's argument are read the same way (:func:`.._base.lenient`). Type
checkers see the plain types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._agent import AgentInput
from .._base import lenient

if TYPE_CHECKING:
    StartInput = AgentInput | str | None
else:
    StartInput = lenient(AgentInput, task=True)
