"""Backend choice: a missing sandbox is a typed, non-retryable error naming the fix;
running unsandboxed needs its loud name; heartbeats keep a long command alive."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._sandbox import BwrapBackend, SandboxUnavailable, select_backend
from tests._bash_support import bash_worker

WORKER = "run_cr@1/steps/step_1"


def test_missing_bwrap_says_what_to_install() -> None:
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        BwrapBackend("/nonexistent/bwrap").check()


def test_unknown_choice_is_refused() -> None:
    with pytest.raises(SandboxUnavailable, match="unknown sandbox 'none'"):
        select_backend("none")


async def test_unavailable_sandbox_fails_the_activity_with_a_typed_error(
    dev_env: WorkflowEnvironment, data_dir: Path
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")], sandbox="none")
    async with bash_worker(dev_env, plugin) as bash:
        with pytest.raises(WorkflowFailureError) as failure:
            await bash.one(WORKER, "true")
    cause = failure.value.cause
    assert isinstance(cause, ActivityError)
    assert isinstance(cause.cause, ApplicationError)
    assert cause.cause.type == "LwSandboxUnavailable" and cause.cause.non_retryable


async def test_unsandboxed_is_an_explicit_opt_in(
    dev_env: WorkflowEnvironment, data_dir: Path
) -> None:
    plugin = LittleWorkflowPlugin(
        data_dir, [WorkflowDefinition(id="cr")], sandbox="unsandboxed-dangerous"
    )
    async with bash_worker(dev_env, plugin) as bash:
        result = await bash.one(WORKER, "echo hi > x && cat /mnt/scratch/own/x && pwd")
    assert result.sandbox == "unsandboxed-dangerous"
    assert result.stdout == "hi\n/mnt/scratch/own\n"
    assert (plugin.config.scope_of(WORKER, "lw.Worker").own_scratch / "x").read_text() == "hi\n"


async def test_default_plugin_uses_the_kernel_sandbox(
    dev_env: WorkflowEnvironment, data_dir: Path
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")])
    async with bash_worker(dev_env, plugin) as bash:
        result = await bash.one(WORKER, "true")
    assert result.sandbox in ("bwrap+seccomp", "landlock+seccomp")


async def test_heartbeats_keep_a_long_command_alive(
    dev_env: WorkflowEnvironment, data_dir: Path
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")])
    async with bash_worker(dev_env, plugin) as bash:
        results = await bash.run(WORKER, ["sleep 9; echo done"], heartbeat_timeout_seconds=5)
    assert results[0].stdout == "done\n"
