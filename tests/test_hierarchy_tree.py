"""An orchestrator starts planner sub-runs and planners start worker steps, all with
deterministic IDs that are the run layout, labelled for the Temporal UI."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.common import SearchAttributeKey
from temporalio.testing import WorkflowEnvironment

from lw_temporal import (
    AgentInput,
    AgentResult,
    MemoryConfig,
    ModelRequest,
    ModelResponse,
    Role,
    ToolCall,
    WorkflowDefinition,
)
from lw_temporal._agent._tools import TASK_CAP
from lw_temporal.ids import (
    PROGRESS_QUERY,
    SEARCH_ATTRIBUTE_DEFINITION,
    SEARCH_ATTRIBUTE_ROLE,
    Progress,
)
from lw_temporal.options import DeploymentOptions, ModelCallOptions
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import lw_worker
from ._privacy_support import opened_one

ROLE_KEY = SearchAttributeKey.for_keyword(SEARCH_ATTRIBUTE_ROLE)
DEFINITION_KEY = SearchAttributeKey.for_keyword(SEARCH_ATTRIBUTE_DEFINITION)

ALPHA = WorkflowDefinition(id="alpha", memory=MemoryConfig(workflow="none"))
BETA = WorkflowDefinition(id="beta")
#: The model as a regular activity: its input is in the planner's history.
ACTIVITY_MODEL = ModelCallOptions(local_activity=False)

MODEL = ScriptedModel(
    {
        (None, Role.ORCHESTRATOR): [
            [
                tool("plan_workflow", workflow="alpha", task="a"),
                tool("plan_workflow", workflow="beta", task="b"),
            ],
            [tool("finish", summary="pipeline done")],
        ],
        ("alpha", Role.PLANNER): [
            [tool("run_step", task=f"a{i}") for i in range(3)],
            [tool("finish", summary="alpha done")],
        ],
        ("beta", Role.PLANNER): [[tool("run_step", task="b0")], [tool("finish", summary="b")]],
        ("alpha", Role.WORKER): [lambda r: [tool("finish", summary=f"did {r.task}")]],
        ("beta", Role.WORKER): [lambda r: [tool("finish", summary=f"did {r.task}")]],
    }
)


async def test_pipeline_children_extend_their_parents_ids(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    pipeline = f"pipeline_{task_queue}"
    async with lw_worker(
        dev_env,
        data_dir,
        task_queue,
        [ALPHA, BETA],
        MODEL,
        deployment=DeploymentOptions(search_attributes_registered=True),
    ) as client:
        result = await client.execute_workflow(
            "lw.Orchestrator",
            AgentInput(),
            id=pipeline,
            task_queue=task_queue,
            result_type=AgentResult,
        )
        alpha_id = f"{pipeline}/sub-runs/run_alpha@1"
        assert result.children == [alpha_id, f"{pipeline}/sub-runs/run_beta@2"]
        assert result.summary == "pipeline done"
        assert result.turns == 2

        alpha = client.get_workflow_handle(alpha_id, result_type=AgentResult)
        alpha_result = await alpha.result()
        assert alpha_result.children == [f"{alpha_id}/steps/step_{i}" for i in (1, 2, 3)]
        step = await client.get_workflow_handle(
            f"{alpha_id}/steps/step_2", result_type=AgentResult
        ).result()
        assert step.summary == "did a1"
        assert step.role is Role.WORKER

        description = await alpha.describe()
        assert description.workflow_type == "lw.Planner"
        assert description.parent_id == pipeline
        assert await description.memo() == {"lw.role": "planner", "lw.definition": "alpha"}
        assert description.typed_search_attributes.get(ROLE_KEY) == "planner"
        assert description.typed_search_attributes.get(DEFINITION_KEY) == "alpha"
        root = await client.get_workflow_handle(pipeline).describe()
        assert root.typed_search_attributes.get(ROLE_KEY) == "orchestrator"
        assert (await root.memo())["lw.role"] == "orchestrator"

        progress = await alpha.query(PROGRESS_QUERY, result_type=Progress)
        assert progress.status == "finished"
        assert progress.children_started == 3
        assert progress.children_finished == 3
        assert progress.definition_id == "alpha"


async def test_a_planner_runs_alone_with_its_steps_under_it(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    run = f"run_beta@{task_queue}"
    async with lw_worker(dev_env, data_dir, task_queue, [ALPHA, BETA], MODEL) as client:
        result = await client.execute_workflow(
            "lw.Planner",
            AgentInput(task="solo"),
            id=run,
            task_queue=task_queue,
            result_type=AgentResult,
        )
        assert result.children == [f"{run}/steps/step_1"]
        description = await client.get_workflow_handle(run).describe()
        # Without the plugin option the workflows never touch search attributes.
        assert description.typed_search_attributes.get(ROLE_KEY) is None
        assert (await description.memo())["lw.definition"] == "beta"


async def test_children_inherit_the_local_model_setting(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    pipeline = f"pipeline_{task_queue}"
    async with lw_worker(
        dev_env,
        data_dir,
        task_queue,
        [ALPHA, BETA],
        MODEL,
        model_calls=ModelCallOptions(local_activity=True),
    ) as client:
        result = await client.execute_workflow(
            "lw.Orchestrator",
            AgentInput(),
            id=pipeline,
            task_queue=task_queue,
            result_type=AgentResult,
        )
        assert result.summary == "pipeline done"

        async def model_calls(workflow_id: str) -> tuple[int, int]:
            history = await client.get_workflow_handle(workflow_id).fetch_history()
            kinds = [e.event_type for e in history.events]
            return (
                kinds.count(EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED),
                kinds.count(EventType.EVENT_TYPE_MARKER_RECORDED),
            )

        # The root reads the worker's settings once (a local activity) and calls the
        # model locally from its first turn; children get the settings in their input.
        assert await model_calls(pipeline) == (0, 3)
        assert await model_calls(f"{pipeline}/sub-runs/run_alpha@1") == (0, 2)
        assert await model_calls(f"{pipeline}/sub-runs/run_alpha@1/steps/step_1") == (0, 1)


async def test_a_reply_without_tool_calls_ends_the_run_with_its_text(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    class TalkingModel(ScriptedModel):
        async def next_turn(self, request: ModelRequest) -> ModelResponse:
            return ModelResponse(text="nothing left to do")

    async with lw_worker(dev_env, data_dir, task_queue, [BETA], TalkingModel({})) as client:
        result = await client.execute_workflow(
            "lw.Planner",
            AgentInput(),
            id=f"run_beta@{task_queue}",
            task_queue=task_queue,
            result_type=AgentResult,
        )
    assert (result.summary, result.turns) == ("nothing left to do", 1)


async def test_a_plain_string_input_is_the_task(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    run = f"run_alpha@{task_queue}"
    async with lw_worker(
        dev_env, data_dir, task_queue, [ALPHA, BETA], MODEL, model_calls=ACTIVITY_MODEL
    ) as client:
        await client.execute_workflow("lw.Planner", "review X", id=run, task_queue=task_queue)
        step = await client.get_workflow_handle(
            f"{run}/steps/step_1", result_type=AgentResult
        ).result()
    # The planner got "review X"; its script hands each step its own task.
    assert step.summary == "did a0"
    history_input = await _first_model_task(client, run)
    assert history_input == "review X"


async def _first_model_task(client: Client, workflow_id: str) -> str:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            payload = event.activity_task_scheduled_event_attributes.input.payloads[0]
            task: str = json.loads((await opened_one(client, payload)).data)["task"]
            return task
    raise AssertionError("no model call")


async def test_a_huge_task_is_capped_before_it_reaches_every_turn(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    run = f"run_alpha@{task_queue}"
    huge = "context " * 50_000  # 400 KB, kept in every turn's conversation if not capped
    async with lw_worker(
        dev_env, data_dir, task_queue, [ALPHA, BETA], MODEL, model_calls=ACTIVITY_MODEL
    ) as client:
        await client.execute_workflow("lw.Planner", huge, id=run, task_queue=task_queue)
        task = await _first_model_task(client, run)
    assert len(task.encode()) <= TASK_CAP
    assert task.startswith("context context") and task.endswith("context ")


async def test_a_bad_plan_workflow_call_is_a_tool_error_not_a_failed_pipeline(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    def report(request: ModelRequest) -> list[ToolCall]:
        errors = [r.text for r in request.tool_results() if r.is_error]
        return [tool("finish", summary="\n".join(errors))]

    model = ScriptedModel(
        {
            (None, Role.ORCHESTRATOR): [
                [
                    tool("plan_workflow", workflow="Not An Id"),
                    tool("plan_workflow", workflow="unregistered"),
                    tool("run_step", task="orchestrators do not run steps"),
                ],
                report,
            ]
        }
    )
    pipeline = f"pipeline_{task_queue}"
    async with lw_worker(dev_env, data_dir, task_queue, [ALPHA], model) as client:
        result = await client.execute_workflow(
            "lw.Orchestrator",
            AgentInput(),
            id=pipeline,
            task_queue=task_queue,
            result_type=AgentResult,
        )
    bad_id, unregistered, wrong_tool = result.summary.split("\n")[:3]
    assert bad_id.startswith("cannot start plan_workflow: definition id 'Not An Id'")
    # The ID was valid, so the child started and failed typed; the pipeline goes on.
    assert unregistered.startswith(f"{pipeline}/sub-runs/run_unregistered@1 failed: ")
    assert "LwUnknownDefinition" in unregistered
    assert wrong_tool.startswith("unknown tool 'run_step' for the orchestrator")
    assert result.children == [f"{pipeline}/sub-runs/run_unregistered@1"]
