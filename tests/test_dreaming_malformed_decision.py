"""A dream's approve or reject update with a payload that is not a decision (no
``who``, a number, a list, ``only`` not a list of paths) is refused as
``LwInvalidRequest``, naming what is wrong and what to send, and decides nothing; the
dream still waits for review, and a real approval promotes. Before, the SDK refused
such a payload with "Failed decoding arguments"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from lw_temporal.dreaming import DreamStatus, approve_dream
from lw_temporal.errors import INVALID_REQUEST

from ._dreaming_support import (
    Script,
    dreaming_worker,
    run_planners,
    start_dream,
    unique_definition,
    wait_for_status,
)

BAD: list[tuple[Any, str]] = [
    ({"why": "fine"}, "who: Field required"),
    ({"who": ""}, "who: String should have at least 1 character"),
    ({"who": "alice", "only": 5}, "only: Input should be a valid tuple"),
    (12345, "valid dictionary"),
    (["alice"], "valid dictionary"),
]


async def test_a_payload_that_is_not_a_decision_is_refused_and_decides_nothing(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    target = unique_definition("malformed")
    async with dreaming_worker(dev_env, data_dir, task_queue, [target]) as client:
        await run_planners(client, task_queue, target, [Script(commands=["exit 3"],
                                                               lessons=["pin it"])])  # fmt: skip
        handle = await start_dream(client, task_queue, target)
        await wait_for_status(handle, DreamStatus.AWAITING_APPROVAL)
        for update in ("approve", "reject"):
            for raw, said in BAD:
                with pytest.raises(WorkflowUpdateFailedError) as refused:
                    await handle.execute_update(update, raw)
                cause = refused.value.cause
                assert isinstance(cause, ApplicationError), repr(cause)
                assert cause.type == INVALID_REQUEST, cause
                assert said in cause.message and handle.id in cause.message, cause.message
                assert f"lw-temporal dream {update} " in cause.message, cause.message
        state = await wait_for_status(handle, DreamStatus.AWAITING_APPROVAL)
        assert state.status is DreamStatus.AWAITING_APPROVAL
        outcome = await approve_dream(client, handle.id, "alice", "looks right")
        result = await handle.result()
    assert outcome.promoted and result.status is DreamStatus.APPROVED
