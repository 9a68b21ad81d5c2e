"""What a run may believe about itself: its ID, its parent, and its input.

The ID is the run's path on disk, so a workflow started under a forged ID would read
another run's scratch: each run checks at start that its ID is of the grammar and of
its role and that it extends its parent's (``workflow.info().parent``, from the
server). A child that passes has the parent its ID names.

A run's input is data from whoever started it. Only a parent (checked above) or the
run's own continue-as-new hands it configuration: worker settings (turn budgets,
fan-out bounds, the host pin) and carried state (counters, the conversation's tail).
A run a client started reads its worker's settings instead and starts from a fresh
state, whatever its input says. The server names a "continued from" run for a retry
attempt and a cron run too, both started with the first run's input: a retry attempt's
input is the client's as the first attempt's was, and a cron schedule is refused.
(The activities check the same from the server's side: ``_callers``.)
"""

from __future__ import annotations

from temporalio import workflow

from ._agent import AgentInput
from ._ids import AgentId, InvalidWorkflowId, Role, parse_workflow_id, parse_workflow_id_for_type
from .errors._kinds import HIERARCHY_VIOLATION, INVALID_REQUEST, INVALID_WORKFLOW_ID, lw_error

#: The patch under which a run a client started ignores settings and state in its input.
CLIENT_INPUT_PATCH = "lw-client-input-is-data"
#: The patch under which a retry attempt's input is a client's too, and cron is refused.
RETRY_INPUT_PATCH = "lw-retry-input-is-data"


def _parent_role(workflow_id: str) -> Role | None:
    try:
        return parse_workflow_id(workflow_id).role
    except InvalidWorkflowId:
        return None


def check_identity() -> AgentId:
    """Refuse an ID outside the grammar, of another role, or not under its parent."""
    info = workflow.info()
    try:
        agent_id = parse_workflow_id_for_type(info.workflow_id, info.workflow_type)
    except InvalidWorkflowId as err:
        raise lw_error(INVALID_WORKFLOW_ID, str(err)) from None
    expected = agent_id.parent
    actual = info.parent.workflow_id if info.parent else None
    if expected is not None and actual != str(expected):
        started_by = f"workflow {actual!r}" if actual else "a client"
        raise lw_error(
            HIERARCHY_VIOLATION,
            f"workflow {info.workflow_id!r} was started by {started_by}, but its ID "
            f"places it under {str(expected)!r}; only that {expected.role.value} may "
            f"start it (start a standalone run with an ID like "
            f"'run_<definition>@<token>' or 'pipeline_<token>' instead)",
        )
    if expected is None and info.parent is not None:
        parent_type = _parent_role(info.parent.workflow_id)
        if parent_type is not None:
            raise lw_error(
                HIERARCHY_VIOLATION,
                f"workflow {info.workflow_id!r} is a top-level ID but was started by lw "
                f"{parent_type.value} {info.parent.workflow_id!r}; children of an lw "
                "workflow must extend its ID",
            )
    return agent_id


def trusted_input(agent_id: AgentId, agent_input: AgentInput) -> AgentInput:
    """The input without the configuration a client may not give: settings and
    state come only from an lw parent (the identity check confirmed it is the one
    the ID names) or from this run's own continue-as-new."""
    info = workflow.info()
    # Each run of a cron schedule starts with the first run's input and names the run
    # before it as the one it continued from, like a continue-as-new, so its input
    # cannot be told from carried state: lw runs start from a Schedule. (A dream builds
    # its agent's input itself, and has claimed its runs by now.)
    if (
        agent_id.parent is None
        and agent_id.role is not Role.DREAMING
        and info.cron_schedule is not None
        and workflow.patched(RETRY_INPUT_PATCH)
    ):
        raise lw_error(
            INVALID_REQUEST,
            f"workflow {info.workflow_id!r} was started with a cron schedule "
            f"({info.cron_schedule!r}); lw runs do not take one: start them from a "
            "Temporal Schedule instead",
        )
    # A retry attempt (attempt > 1) is started by the server with the first attempt's
    # input and names that attempt as the run it continued from: not a continue-as-new.
    own_continue = info.continued_run_id is not None and info.attempt == 1
    from_lw = agent_id.parent is not None or own_continue
    if from_lw or (agent_input.settings is None and agent_input.state is None):
        return agent_input
    if info.continued_run_id is not None and not workflow.patched(RETRY_INPUT_PATCH):
        return agent_input  # a history recorded before retries were told apart
    if not workflow.patched(CLIENT_INPUT_PATCH):
        return agent_input  # a history recorded before the rule
    workflow.logger.warning(
        "workflow %r: ignoring the settings and state in its input (a run started by "
        "a client reads its worker's settings and starts fresh)",
        info.workflow_id,
    )
    return agent_input.model_copy(update={"settings": None, "state": None})
