"""Failure messages and stack traces sealed with the payloads.

Temporal keeps a failure's ``message`` and ``stack_trace`` outside its payloads, where no
codec reaches them, and lw's failures can carry a run's text: a model's refusal quotes
its reply, a provider's or an exception's message what it was given. With sealing on,
the workers' failure converter moves both into the failure's ``encoded_attributes``
payload (Temporal's own ``encode_common_attributes``), which the codec seals with the
tree's key; the history keeps ``Encoded failure``. Every reader with the keys (the SDK,
``lw-temporal run``/``status``, a dream reading a run) gets the message back.

One failure stays readable: a payload this worker could not open (``PayloadSealed``).
Its message names only the tree whose key is missing, and a client holding other keys
(the case it reports) must be able to read it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.converter import DefaultFailureConverter, PayloadConverter

from ._codec import PayloadSealed

#: What Temporal leaves in ``message`` when it moved the message into the payload.
ENCODED_MESSAGE = "Encoded failure"


class SealingFailureConverter(DefaultFailureConverter):
    """Temporal's default failure converter with its common attributes encoded."""

    def __init__(self) -> None:
        super().__init__(encode_common_attributes=True)
        self._plain = DefaultFailureConverter()

    def to_failure(
        self, exception: BaseException, payload_converter: PayloadConverter, failure: Failure
    ) -> None:
        # Called again for each cause: only the PayloadSealed level itself stays plain.
        if isinstance(exception, PayloadSealed):
            self._plain.to_failure(exception, payload_converter, failure)
        else:
            super().to_failure(exception, payload_converter, failure)


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
