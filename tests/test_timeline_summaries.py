"""Each activity an agent schedules carries a one-line summary in Temporal's user
metadata, so the UI timeline reads as what the agent did; summaries are bounded and
never show more than a short prefix of a secret-looking command."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal._telemetry._summary import SUMMARY_CAP, command_summary, tool_summary

from ._telemetry_support import run_sample_pipeline


async def test_every_scheduled_activity_of_the_sample_pipeline_has_a_summary(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    run = await run_sample_pipeline(dev_env, data_dir, task_queue)
    assert run.of_type("lw.bash") and run.of_type("lw.model")
    for activity in run.activities:
        assert activity.summary, activity
        assert "\n" not in activity.summary and len(activity.summary) <= SUMMARY_CAP
        if activity.activity_type == "lw.bash":
            assert activity.summary.startswith("bash: ")
        elif activity.activity_type == "lw.model":
            assert activity.summary.startswith("model turn ")
        elif activity.activity_type.startswith("lw.memory."):
            tool = "memory_" + activity.activity_type.removeprefix("lw.memory.")
            assert activity.summary.startswith(tool + " ")
    planner = next(w for w in run.workflow_ids if "run_candidate-review@" in w and "steps" not in w)
    summaries = [a.summary for a in run.activities if a.workflow_id == planner]
    assert "memory_append workflow/lessons-learned.md" in summaries
    assert "model turn 1" in summaries and "model turn 2" in summaries
    assert "bash: cat /mnt/scratch/from-orchestrator/brief.md; ls /mnt/memory/pipeline/; " in (
        next(s for s in summaries if s and s.startswith("bash: cat /mnt/scratch/"))
    )


def test_a_command_summary_is_one_bounded_line() -> None:
    assert command_summary("ls /mnt/memory/workflow/") == "bash: ls /mnt/memory/workflow/"
    assert command_summary("cat a \\\n  b\n\necho c") == "bash: cat a \\ b echo c"
    long = command_summary("echo " + "x" * 5000)
    assert len(long) == SUMMARY_CAP and long.endswith("…")


def test_a_secret_looking_command_keeps_only_a_short_prefix() -> None:
    for command in (
        "curl -H 'Authorization: Bearer abc.def.ghi' https://api.example.com/v1/items",
        "export GITHUB_TOKEN=ghp_" + "a" * 36 + " && gh repo list",
        "ANTHROPIC_API_KEY=sk-ant-api03-" + "b" * 40 + " python run.py",
        "mysql --password=hunter2 -e 'select 1'",
        "git clone https://deploy:s3cr3tpass@git.example.com/repo.git",
    ):
        summary = command_summary(command)
        assert summary.startswith("bash: ") and summary.endswith("…[redacted]"), summary
        assert len(summary) <= len("bash: ") + 16 + len(" …[redacted]")
        for secret in ("abc.def.ghi", "ghp_aaaa", "sk-ant-api03", "hunter2", "s3cr3tpass"):
            assert secret not in summary


def test_memory_and_other_tools_name_what_they_touch() -> None:
    assert (
        tool_summary("memory_append", {"path": "/mnt/memory/workflow/lessons-learned.md"})
        == "memory_append workflow/lessons-learned.md"
    )
    assert tool_summary("memory_read", {"path": 7}) == "memory_read ?"
    assert tool_summary("bash", {}) == "bash"
