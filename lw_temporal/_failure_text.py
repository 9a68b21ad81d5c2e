"""A failure's message as a reader with keys sees it.

With sealing on, workers move a failure's message into its sealed ``encoded_attributes``
(see ``_privacy._sealed_failures``); every reader of a history (``run``/``status``, the
live tree, a dream reading a run) opens it here. It lives below the privacy package,
which those readers sit beside or beneath, and needs nothing but Temporal's types.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure

Decode = Callable[[Sequence[Payload]], Awaitable[list[Any]]]


async def opened_message(failure: Failure, decode: Decode) -> str:
    """``failure.message``, opened from its sealed attributes when it was sealed (a
    reader without the tree's key gets a line saying the message is sealed)."""
    if not failure.HasField("encoded_attributes"):
        return failure.message
    try:
        [attributes] = await decode([failure.encoded_attributes])
    except Exception:  # no key, a shredded one, or no codec at all: stays sealed
        return "(message sealed: this client lacks the run tree's key)"
    message = attributes.get("message") if isinstance(attributes, dict) else None
    return message if isinstance(message, str) else failure.message
