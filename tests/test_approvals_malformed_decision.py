"""A decision payload that is not one is refused by the run as ``LwApprovalRefused``,
naming what is wrong and what to send, and decides nothing: a string or a number for
``approve`` (``"yes"``, ``0``), a missing ``by``, a number or a list for the whole
decision. Before, the SDK refused such a payload with "Failed decoding arguments", and
took ``"approve": "yes"`` (and ``"no"``, ``1``) as a bool. The request then waits as
before, and a real decision runs the call once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentResult, LittleWorkflowPlugin
from lw_temporal.errors import APPROVAL_REFUSED
from lw_temporal.ids import DataLayout
from lw_temporal.testing import plugin_client

from ._approvals_support import DEFINITIONS, lw, until_listed, worker

DECIDE = "lw.approvals.decide"
NOT_BOOL = "approve: Input should be a valid boolean"
BAD: list[tuple[Any, str]] = [
    ({"request_id": "a1", "approve": "yes", "by": "carol"}, NOT_BOOL),
    ({"request_id": "a1", "approve": "no", "by": "carol"}, NOT_BOOL),
    ({"request_id": "a1", "approve": 0, "by": "carol"}, NOT_BOOL),
    ({"request_id": "a1", "approve": True}, "by: Field required"),
    (12345, "valid dictionary"),
    (["a1", True, "carol"], "valid dictionary"),
]


async def test_a_payload_that_is_not_a_decision_is_refused_and_decides_nothing(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    workflow_id = f"run_deployer@{task_queue}"
    scratch = DataLayout.at(data_dir).runs / workflow_id / "scratch"
    client = plugin_client(dev_env.client, LittleWorkflowPlugin(data_dir, DEFINITIONS))
    async with worker(dev_env, data_dir, task_queue):
        handle = await client.start_workflow(
            "lw.Planner", "Deploy.", id=workflow_id, task_queue=task_queue, result_type=AgentResult
        )
        [line] = await until_listed(dev_env, workflow_id)
        for raw, said in BAD:
            with pytest.raises(WorkflowUpdateFailedError) as refused:
                await handle.execute_update(DECIDE, raw)
            cause = refused.value.cause
            assert isinstance(cause, ApplicationError), repr(cause)
            assert cause.type == APPROVAL_REFUSED, cause
            assert said in cause.message and workflow_id in cause.message, cause.message
            assert "lw-temporal approvals approve|deny" in cause.message, cause.message
        assert len(await until_listed(dev_env, workflow_id)) == 1  # still waiting, undecided
        assert not (scratch / "deploy.log").exists()
        request_id = line.split("  ")[1]
        code, _, err = await lw(
            dev_env, "approvals", "approve", workflow_id, request_id, "--by", "carol", "--why", "go"
        )
        assert code == 0, err
        result = await handle.result()
    assert "deployed" in result.summary
    assert (scratch / "deploy.log").read_text() == "deploy\n"
