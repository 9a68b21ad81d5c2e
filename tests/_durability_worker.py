"""The sample worker, with each worker step's first command slowed down and marked, so a
test can SIGKILL the process while a sandboxed command is running:
``lw-temporal worker ... --model tests._durability_worker:slow_steps_model``."""

from __future__ import annotations

from lw_temporal import Role
from lw_temporal._agent import ModelRequest, ModelResponse, ScriptedModel, ToolCall
from workflows.pipeline import SCRIPTS

MARKER = ".started"


class SlowStepsModel(ScriptedModel):
    async def next_turn(self, request: ModelRequest) -> ModelResponse:
        response = await super().next_turn(request)
        if request.role is not Role.WORKER or request.turn != 0:
            return response
        calls = [
            ToolCall(
                name=c.name,
                id=c.id,
                arguments={
                    **c.arguments,
                    "command": f"touch /mnt/scratch/own/{MARKER}; sleep 3\n"
                    + c.arguments["command"],
                },
            )
            if c.name == "bash"
            else c
            for c in response.tool_calls
        ]
        return ModelResponse(text=response.text, tool_calls=calls)


def slow_steps_model() -> SlowStepsModel:
    return SlowStepsModel(SCRIPTS)
