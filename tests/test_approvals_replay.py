"""A recorded planner run with approvals replays on today's code: a call approved, one
denied and one left to time out, each decision taken by the update and audited.

Re-record after an intended, versioned change with ``LW_RECORD_HISTORIES=1 pytest
tests/test_approvals_replay.py`` and commit ``tests/histories/approvals-planner-tagged.json``
(``approvals-planner.json`` is the history of before tagged request ids, kept).
"""

from __future__ import annotations

import asyncio
import json
import os
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from lw_temporal import (
    AgentResult,
    ApprovalRule,
    LittleWorkflowPlugin,
    ModelRequest,
    Role,
    ToolCall,
)
from lw_temporal import WorkflowDefinition as Definition
from lw_temporal._approvals._client import decide, list_approvals
from lw_temporal.options import PrivacyOptions
from lw_temporal.testing import ScriptedModel, running_worker, tool

HISTORIES = Path(__file__).parent / "histories"
#: Recorded by today's code (request ids tagged, ``a1-3f9c2e``).
HISTORY = HISTORIES / "approvals-planner-tagged.json"
#: Recorded before the ``lw-approval-ids-tagged`` patch (ids ``a1``, ``a2``): running
#: workflows of that time must keep replaying.
UNTAGGED = HISTORIES / "approvals-planner.json"
WORKFLOW_ID = "run_approved@recorded"
DEFINITIONS = [
    Definition(
        id="approved",
        approvals=(
            ApprovalRule(tool="bash", command="^echo slow", timeout=timedelta(seconds=2)),
            ApprovalRule(tool="bash", command="deploy"),
        ),
    )
]


def _told(request: ModelRequest) -> list[ToolCall]:
    return [tool("finish", summary=" | ".join(r.text for r in request.last_results()))]


MODEL = ScriptedModel(
    {
        ("approved", Role.PLANNER): [
            [
                tool("bash", command="echo deploy one"),
                tool("bash", command="echo deploy two"),
                tool("bash", command="echo slow three"),
            ],
            _told,
        ]
    }
)


@pytest.mark.skipif(
    os.environ.get("LW_RECORD_HISTORIES") != "1",
    reason="set LW_RECORD_HISTORIES=1 to re-record tests/histories/",
)
async def test_record_the_approvals_history(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    async with running_worker(
        dev_env.client,
        data_dir=data_dir,
        definitions=DEFINITIONS,
        model=MODEL,
        task_queue=task_queue,
        privacy=PrivacyOptions(encrypt=False),
    ) as client:
        handle = await client.start_workflow(
            "lw.Planner", "go", id=WORKFLOW_ID, task_queue=task_queue, result_type=AgentResult
        )
        for _ in range(600):  # until all three calls of the reply wait
            pending = (await list_approvals(client, workflow_id=WORKFLOW_ID)).pending
            if len(pending) == 3:
                break
            await asyncio.sleep(0.1)
        first, second = pending[0].id, pending[1].id
        await decide(client, WORKFLOW_ID, first, approve=True, by="carol", why="fine")
        await decide(client, WORKFLOW_ID, second, approve=False, by="carol", why="not two")
        result = await handle.result()
        assert "timed out" in result.summary
        history = await handle.fetch_history()
    HISTORY.write_text(json.dumps(json.loads(history.to_json()), indent=1) + "\n")


def _history(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(WORKFLOW_ID, path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("recorded", [HISTORY, UNTAGGED], ids=["tagged", "untagged"])
async def test_the_approvals_history_replays(tmp_path: Path, recorded: Path) -> None:
    history = _history(recorded)
    replayer = Replayer(workflows=[], plugins=[LittleWorkflowPlugin(tmp_path, DEFINITIONS)])
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure
