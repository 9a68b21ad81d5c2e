"""A dream whose history grows past the server's continue-as-new suggestion still ends
with its proposal. The agent loop continued every role as new when the server
suggested it, so a long dream restarted ``lw.Dreaming`` with an agent's input it cannot
read and lost the runs it had claimed. A dream's turns are bounded by its definition,
so it never continues as new: here on a dev server of its own whose suggestion comes
after 30 events."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.common import SearchAttributeKey
from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, Role, WorkflowDefinition
from lw_temporal.dreaming import (
    DreamInput,
    DreamResult,
    DreamStatus,
    approve_dream,
    wait_for_review,
)
from lw_temporal.ids import (
    DREAMING_WORKFLOW,
    SEARCH_ATTRIBUTE_DEFINITION,
    SEARCH_ATTRIBUTE_ROLE,
)
from lw_temporal.testing import ScriptedModel, temporal_cli_path, tool

from ._hierarchy_support import lw_worker
from ._privacy_support import wait_listed

TURNS = 12


async def test_a_long_dream_never_continues_as_new_and_ends_with_its_proposal(
    data_dir: Path, task_queue: str
) -> None:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_cli_path(),
        dev_server_log_level="error",
        dev_server_extra_args=[
            "--dynamic-config-value", "limit.historyCount.suggestContinueAsNew=30",
        ],
        search_attributes=[
            SearchAttributeKey.for_keyword(SEARCH_ATTRIBUTE_ROLE),
            SearchAttributeKey.for_keyword(SEARCH_ATTRIBUTE_DEFINITION),
        ],
    )  # fmt: skip
    target = f"long-{uuid.uuid4().hex[:8]}"
    note = tool("memory_write", path="/mnt/memory/workflow/notes.md", content="- a lesson\n")
    model = ScriptedModel(
        {
            (target, Role.PLANNER): [[tool("finish", summary="did the work")]],
            (target, Role.DREAMING): [
                *([tool("bash", command="ls /mnt/scratch/own/runs")] for _ in range(TURNS)),
                [note],
                [tool("finish", summary="noted")],
            ],
        }
    )
    try:
        async with lw_worker(env, data_dir, task_queue, [WorkflowDefinition(id=target)],
                             model) as client:  # fmt: skip
            await client.execute_workflow(
                "lw.Planner", AgentInput(task="work"), id=f"run_{target}@1", task_queue=task_queue
            )
            await wait_listed(client, target)
            dream_id = f"dream_{target}@{uuid.uuid4().hex[:8]}"
            handle = await client.start_workflow(
                DREAMING_WORKFLOW, DreamInput(target=target), id=dream_id,
                task_queue=task_queue, result_type=DreamResult,
            )  # fmt: skip
            state = await wait_for_review(client, dream_id, within=timedelta(seconds=120))
            assert state.runs == 1 and state.changes_count == 1, state
            history = await handle.fetch_history()
            kinds = [e.event_type for e in history.events]
            assert len(kinds) > 30, len(kinds)  # past the suggestion
            assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW not in kinds
            outcome = await approve_dream(client, dream_id, "alice", "fine")
            result = await handle.result()
    finally:
        await env.shutdown()
    assert outcome.promoted and result.status is DreamStatus.APPROVED
