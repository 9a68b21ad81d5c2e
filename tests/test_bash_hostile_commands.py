"""Commands built to break the pre-check get an answer, never a failed activity.

Nested 400 deep, longer than the limit, thousands of subshells or blocks, a long
``&&`` chain, a command naming a 40-link symlink chain thousands of times: each runs
as one worker step on each sandbox with a single attempt allowed (a failed activity
would fail the workflow), leaves the data dir as it was, and the same worker serves
the next command. The check also runs off the event loop and within a time budget.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import REJECTED_EXIT_CODE, BashRequest, LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._bash import BashActivities
from lw_temporal._pathcheck import (
    MAX_COMMAND_BYTES,
    MAX_NESTING,
    TOO_COSTLY,
    TOO_DEEP,
    TOO_LONG,
    UNPARSEABLE,
    check_command,
)
from tests._bash_support import SANDBOXES, bash_worker, data_snapshot

WORKER = "pipeline_hostile/sub-runs/run_cr@1/steps/step_1"
#: ``l0 -> l1 -> ... -> l39 -> d`` in the own scratch (the most hops the check follows).
CHAIN = "mkdir -p d && ln -sfn d l39 && " + " && ".join(
    f"ln -sfn l{i + 1} l{i}" for i in range(38, -1, -1)
)
#: About 120 KB naming 5,000 distinct paths under the chain (below the 128 KiB a
#: single argv string may hold, so the command itself runs).
THROUGH_CHAIN = "cat " + " ".join(f"/mnt/scratch/own/l0/x{i}" for i in range(5000)) + " ; true"

# (case, command, start of the expected rejection or None when it must run)
REFUSED = [
    ("nested-substitutions", "echo " + "$(" * 400 + "x" + ")" * 400, TOO_DEEP),
    ("nested-subshells", "( " * 5000 + "true" + " )" * 5000, TOO_DEEP),
    ("nested-blocks", "{ " * 3000 + "true; " + "}; " * 3000, TOO_DEEP),
    ("over-the-limit", "echo " + "x" * MAX_COMMAND_BYTES, TOO_LONG),
]
RUN = [
    ("long-and-chain", "true && " * 12_000 + "echo done", "done\n"),
    (
        "nested-at-the-limit",
        "( " * (MAX_NESTING - 1) + "echo deep" + " )" * (MAX_NESTING - 1),
        "deep\n",
    ),
    ("symlink-chain-named-5000-times", THROUGH_CHAIN, ""),
]


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_hostile_commands_get_a_result_and_change_nothing(
    dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")], sandbox=sandbox)
    scope = plugin.config.scope_of(WORKER, "lw.Worker")
    for mount in scope.mounts:
        mount.real.mkdir(parents=True, exist_ok=True)
        (mount.real / "notes.md").write_text("notes\n")
    async with bash_worker(dev_env, plugin) as bash:
        setup = await bash.one(WORKER, CHAIN)
        assert setup.exit_code == 0, setup.stderr
        for case, command, expected in REFUSED:
            before = data_snapshot(scope)
            result, after_it = await bash.run(WORKER, [command, "echo served"])
            assert result.exit_code == REJECTED_EXIT_CODE, case
            assert result.rejection is not None and result.rejection.startswith(expected), (
                case,
                result.rejection,
            )
            assert "limit" in result.rejection, result.rejection
            assert after_it.stdout == "served\n", case
            assert data_snapshot(scope) == before, case
        for case, command, stdout in RUN:
            before = data_snapshot(scope)
            result, after_it = await bash.run(WORKER, [command, "echo served"])
            assert result.rejection is None, (case, result.rejection)
            assert result.stdout == stdout, (case, result.stderr[:500])
            assert after_it.stdout == "served\n", case
            assert data_snapshot(scope) == before, case


def test_a_check_past_its_budget_is_a_refusal(data_dir: Path) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")])
    scope = plugin.config.scope_of(WORKER, "lw.Worker")
    rejection = check_command(scope, THROUGH_CHAIN, budget=0).rejection
    assert rejection is not None and rejection.startswith(TOO_COSTLY), rejection
    assert "split it" in rejection
    assert check_command(scope, THROUGH_CHAIN).rejection is None


def test_text_bash_cannot_receive_is_a_refusal(data_dir: Path) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")])
    scope = plugin.config.scope_of(WORKER, "lw.Worker")
    for command in ("echo \ud800", "cat /etc/\udcff", "echo a\x00b"):
        rejection = check_command(scope, command).rejection
        assert rejection is not None and rejection.startswith(UNPARSEABLE), rejection


def test_a_request_of_any_length_decodes() -> None:
    """The limit is the pre-check's readable refusal, not a decode failure that
    Temporal would retry."""
    assert BashRequest(command="x" * (2 * MAX_COMMAND_BYTES)).command


async def test_the_check_runs_off_the_event_loop(data_dir: Path) -> None:
    """A refused command never reaches the sandbox, so every loop turn taken while
    ``run`` is awaited was taken while the check ran."""
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")])
    activities: BashActivities = plugin.bash_activities
    scope = plugin.config.scope_of(WORKER, "lw.Worker")
    turns = 0
    done = asyncio.Event()

    async def count() -> None:
        nonlocal turns
        while not done.is_set():
            turns += 1
            await asyncio.sleep(0)

    counter = asyncio.create_task(count())
    await asyncio.sleep(0)
    start = turns
    result = await activities.run(
        scope, BashRequest(command=THROUGH_CHAIN + " /etc/shadow"), tag="t"
    )
    done.set()
    await counter
    assert result.rejection is not None and "/etc/shadow" in result.rejection
    assert turns - start > 1
