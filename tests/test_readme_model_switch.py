"""The README's two-line switch from the scripted model to Claude works as written:
applied to the README's worker snippet, it builds a plugin whose model is an
``AnthropicModel`` taking its key from ``ANTHROPIC_API_KEY``, and that model answers a
turn through the official SDK (here over the strict stand-in's transport)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lw_temporal import LittleWorkflowPlugin, ModelRequest, ModelResponse, Role, ToolCall
from lw_temporal.models import AnthropicModel

from ._provider_standins import AnthropicStandIn

README = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, flags=re.S)


def _switched_worker_snippet() -> str:
    worker = next(b for b in _blocks() if "model=sample_model()" in b)
    switch = next(b for b in _blocks() if "AnthropicModel" in b and "instead of:" in b)
    lines = [line for line in switch.splitlines() if line.strip()]
    assert len(lines) == 2, switch
    for line in lines:
        new, old = line.split("# instead of:")
        target = next(w for w in worker.splitlines() if w.strip().startswith(old.strip()))
        worker = worker.replace(target, new.rstrip())
    # Up to the plugin: the rest of the snippet connects to a server.
    return worker.split("async def main")[0]


async def _finish(request: ModelRequest) -> ModelResponse:
    return ModelResponse(tool_calls=[ToolCall(name="finish", arguments={"summary": "hi"})])


async def test_the_two_line_switch_builds_a_working_claude_plugin(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    code = _switched_worker_snippet().replace('"/var/lib/lw"', repr(str(tmp_path)))
    assert "sample_model" not in code
    scope: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), scope)
    plugin = scope["plugin"]
    assert isinstance(plugin, LittleWorkflowPlugin)
    model = plugin.model_activities.model
    assert isinstance(model, AnthropicModel)
    assert model.client.api_key == "sk-ant-test"
    # The same model over a stand-in transport answers a turn in the native protocol.
    standin = AnthropicStandIn(_finish)
    model.client = standin.client().with_options(max_retries=0)
    reply = await model.next_turn(
        ModelRequest(
            role=Role.PLANNER,
            workflow_id="run_candidate-review@1",
            definition_id="candidate-review",
            turn=0,
            max_turns=12,
            mounts="Scratch mounts (ephemeral, this run only):\n- /mnt/scratch/own/ (rw)",
            instructions="Review.",
            task="review candidate ABC-123",
            tools=[],
        )
    )
    assert standin.violations == []
    assert reply.tool_calls[0].name == "finish"
    assert standin.requests[0]["model"] == model.model
