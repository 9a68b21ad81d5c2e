"""Workflow IDs, the data dir layout they define, and the names of the workflows.

The workflow ID *is* the run's path under ``<dataDir>/runs/``, so a caller who starts
a pipeline chooses where its scratch lives, and every activity recovers the whole
hierarchy from its own workflow ID::

    orchestrator  pipeline_<token>
    planner       [<orchestrator id>/sub-runs/]run_<definition id>@<token>
    worker        <planner id>/steps/step_<token>
    dreaming      dream_<definition id>@<token>

:class:`AgentId` is a parsed workflow ID (which agent, where in the tree); it is not
Temporal's run id, which names one execution of a workflow ID. :func:`parse_workflow_id`
builds one or raises :class:`InvalidWorkflowId` saying how to fix the ID.

Constants:

- ``ORCHESTRATOR_WORKFLOW``, ``PLANNER_WORKFLOW``, ``WORKER_WORKFLOW``,
  ``DREAMING_WORKFLOW``: the workflow type names (``lw.Orchestrator``, ``lw.Planner``,
  ``lw.Worker``, ``lw.Dreaming``) to start with a ``Client``.
- ``BASH_ACTIVITY``: the name of the activity (``lw.bash``) that takes a
  ``BashRequest``, as histories, interceptors and traces show it.
- ``PROGRESS_QUERY``: the query (``lw.progress``) every agent workflow answers with a
  :class:`Progress`.
- ``SEARCH_ATTRIBUTE_ROLE``, ``SEARCH_ATTRIBUTE_DEFINITION``: the Keyword search
  attributes (``LwRole``, ``LwDefinition``) the workflows set when the server has them
  registered, so the Temporal UI filters by role and definition.
- ``DEFINITION_ID_PATTERN``, ``TOKEN_PATTERN``: the regular expressions a definition id
  and an ID token must match; ``MAX_WORKFLOW_ID_LENGTH``: Temporal's limit on an ID.
"""

from ._agent import Progress
from ._definitions import pipeline_key
from ._ids import (
    BASH_ACTIVITY,
    DEFINITION_ID_PATTERN,
    DREAMING_WORKFLOW,
    MAX_WORKFLOW_ID_LENGTH,
    ORCHESTRATOR_WORKFLOW,
    PLANNER_WORKFLOW,
    PROGRESS_QUERY,
    SEARCH_ATTRIBUTE_DEFINITION,
    SEARCH_ATTRIBUTE_ROLE,
    TOKEN_PATTERN,
    WORKER_WORKFLOW,
    AgentId,
    DataLayout,
    InvalidWorkflowId,
    Role,
    parse_workflow_id,
    parse_workflow_id_for_type,
)

__all__ = [
    "BASH_ACTIVITY",
    "DEFINITION_ID_PATTERN",
    "DREAMING_WORKFLOW",
    "MAX_WORKFLOW_ID_LENGTH",
    "ORCHESTRATOR_WORKFLOW",
    "PLANNER_WORKFLOW",
    "PROGRESS_QUERY",
    "SEARCH_ATTRIBUTE_DEFINITION",
    "SEARCH_ATTRIBUTE_ROLE",
    "TOKEN_PATTERN",
    "WORKER_WORKFLOW",
    "AgentId",
    "DataLayout",
    "InvalidWorkflowId",
    "Progress",
    "Role",
    "parse_workflow_id",
    "parse_workflow_id_for_type",
    "pipeline_key",
]
