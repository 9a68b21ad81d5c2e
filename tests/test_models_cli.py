"""``--model anthropic:<model>`` / ``openai:<model>`` build an adapter from the worker's
environment; without the key the worker and the demo stop at once, naming the variable
to set, before any server starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lw_temporal.models import AnthropicModel, ModelSpecError, OpenAIModel, model_from_spec


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return subprocess.run(
        [sys.executable, "-m", "lw_temporal._cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


def test_the_demo_without_a_key_stops_at_once_naming_the_variable(tmp_path: Path) -> None:
    done = _cli("demo", "--data-dir", str(tmp_path / "d"), "--model", "anthropic:claude-opus-4-7")
    assert done.returncode != 0
    assert "set ANTHROPIC_API_KEY" in done.stderr, done.stderr
    assert "dev server" not in done.stdout and not (tmp_path / "d").exists()


def test_the_worker_without_a_key_stops_at_once_naming_the_variable(tmp_path: Path) -> None:
    done = _cli(
        "worker",
        "--data-dir",
        str(tmp_path),
        "--definitions",
        "workflows.pipeline:DEFINITIONS",
        "--model",
        "openai:qwen3",
        "--model-base-url",
        "http://127.0.0.1:9/v1",
    )
    assert done.returncode != 0
    assert "set OPENAI_API_KEY" in done.stderr and "local" in done.stderr, done.stderr


def test_a_provider_spec_builds_its_adapter_from_the_environment() -> None:
    claude = model_from_spec("anthropic:claude-sonnet-4-6", environ={"ANTHROPIC_API_KEY": "k"})
    assert isinstance(claude, AnthropicModel) and claude.model == "claude-sonnet-4-6"
    local = model_from_spec(
        "openai:qwen3", base_url="http://127.0.0.1:8000/v1", environ={"OPENAI_API_KEY": "x"}
    )
    assert isinstance(local, OpenAIModel) and local.model == "qwen3"
    assert str(local.client.base_url).startswith("http://127.0.0.1:8000/v1")
    for bad in ("gemini:pro", "anthropic:", "claude"):
        with pytest.raises(ModelSpecError, match="provider:model"):
            model_from_spec(bad, environ={})
