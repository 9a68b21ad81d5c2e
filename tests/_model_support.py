"""One worker's model request and a real provider model over its stand-in, for the
tests of how provider replies and failures are read."""

from __future__ import annotations

from lw_temporal import Model, ModelRequest, ModelResponse, Role, ToolCall
from lw_temporal.models import AnthropicModel, OpenAIModel

from ._provider_standins import AnthropicStandIn, OpenAIStandIn, StandIn

REQUEST = ModelRequest(
    role=Role.WORKER,
    workflow_id="run_x@1/steps/step_1",
    definition_id="x",
    turn=0,
    max_turns=5,
    mounts="Scratch mounts (ephemeral, this run only):\n- /mnt/scratch/own/ (rw)",
    instructions="",
    task="do it",
    tools=[],
)


async def finish(request: ModelRequest) -> ModelResponse:
    return ModelResponse(tool_calls=[ToolCall(name="finish", arguments={"summary": "ok"})])


def model_pair(provider: str, brain: object = finish) -> tuple[StandIn, Model]:
    """The stand-in of ``provider`` answering as ``brain``, and the model using it."""
    if provider == "anthropic":
        a = AnthropicStandIn(brain)  # type: ignore[arg-type]
        return a, AnthropicModel(client=a.client(), model="claude-sonnet-4-6")
    o = OpenAIStandIn(brain)  # type: ignore[arg-type]
    return o, OpenAIModel(client=o.client(), model="gpt-5.5")
