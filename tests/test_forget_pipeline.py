"""``lw-temporal forget`` of a finished pipeline: its histories on the Temporal server
cannot be decoded any more (shown by the bundled Temporal CLI, without and with the
codec server), its scratch, conversations and its runs' share of a dream's inputs are
gone, an audit line names the erasure, and another pipeline on the same data dir still
decodes and replays."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from lw_temporal import AgentResult, LittleWorkflowPlugin
from lw_temporal._privacy import PayloadSealed
from lw_temporal.dreaming import reject_dream
from lw_temporal.ids import DataLayout

from ._cli_support import cli
from ._hierarchy_support import lw_worker
from ._privacy_support import (
    PLANTED,
    codec_server,
    holding,
    planting_model,
    run_dream,
    run_pipeline,
    secret_definition,
    shown_payloads,
    user_payloads,
)


async def test_a_forgotten_pipeline_is_sealed_everywhere_and_gone_from_disk(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    definition = secret_definition()
    token = uuid.uuid4().hex[:6]
    layout = DataLayout.at(data_dir)
    async with lw_worker(
        dev_env, data_dir, task_queue, [definition], planting_model(definition.id)
    ) as client:
        gone = await run_pipeline(client, task_queue, f"gone-{token}")
        kept = await run_pipeline(client, task_queue, f"kept-{token}")
        dream = await run_dream(client, task_queue, definition.id)
        planner = f"{gone}/sub-runs/run_{definition.id}@1"
        dream_files = data_dir / "runs" / dream / "scratch" / "runs"
        assert (dream_files / f"{gone}+run_{definition.id}@1.md").exists()
        assert (data_dir / ".lw" / "conversations" / gone).is_dir()
        histories = {w: await client.get_workflow_handle(w).fetch_history() for w in (gone, kept)}

        code, out, err = await cli(
            dev_env, "forget", gone, "--data-dir", str(data_dir),
            "--by", "dpo", "--why", "erasure request 42",
        )  # fmt: skip
        assert code == 0, out + err
        assert f"forgot {gone} by dpo: key shredded" in out
        assert f"removed  scratch of the tree runs/{gone} " in out
        assert f"removed  conversations .lw/conversations/{gone} " in out
        assert f"removed  dream run file runs/{dream}/scratch/runs/{gone}+run_" in out
        assert f"remains  dream that read the tree runs/{dream}: " in out
        assert f"forget {dream} to erase them" in out
        assert f"remains  memory written by the tree workflow:{definition.id}:people.md" in out

        # The Temporal server still has the histories: every payload sealed, without
        # the codec and through it (the codec server no longer holds the key).
        async with codec_server(data_dir) as (url, secret):
            through = ("--codec-endpoint", url, "--codec-auth", f"Bearer {secret}")
            for workflow_id in (gone, planner):
                for options in ((), through):
                    payloads = user_payloads(await shown_payloads(dev_env, workflow_id, *options))
                    assert payloads, workflow_id
                    assert {e for e, _ in payloads} == {"binary/encrypted"}, (workflow_id, options)
                    assert not any(PLANTED.encode() in d for _, d in payloads)
            # The other pipeline is decoded through the codec server, and only through it.
            plain = user_payloads(await shown_payloads(dev_env, kept, *through))
            assert "binary/encrypted" not in {e for e, _ in plain}
            assert any(PLANTED.encode() in d for _, d in plain)
            sealed = user_payloads(await shown_payloads(dev_env, kept))
            assert {e for e, _ in sealed} == {"binary/encrypted"}

        # This client's own codec cannot open them either (a fresh read of the store).
        client.data_converter.payload_codec.ring.drop()  # type: ignore[union-attr]
        with pytest.raises(PayloadSealed, match="was forgotten"):
            await client.get_workflow_handle(gone, result_type=AgentResult).result()
        result = await client.get_workflow_handle(kept, result_type=AgentResult).result()
        assert result.summary == "pipeline done"
        await reject_dream(client, dream, "test", "cleanup")

    # Gone from the disk: its scratch, conversations, and its runs in the dream's inputs.
    assert not (layout.runs / gone).exists()
    assert not (data_dir / ".lw" / "conversations" / gone).exists()
    assert (layout.runs / kept).is_dir()
    assert not any(gone in p.name for p in dream_files.iterdir())
    records = data_dir / "runs" / dream / "scratch" / "dream"
    assert not any(gone.encode() in (records / p).read_bytes() for p in holding(records, ""))
    assert (data_dir / ".lw" / "keys" / f"{gone}.shredded").exists()
    assert not (data_dir / ".lw" / "keys" / f"{gone}.key").exists()

    audit = (data_dir / ".lw" / "audit" / "forget.jsonl").read_text().splitlines()
    line = json.loads(audit[-1])
    assert (line["op"], line["tree"], line["by"], line["why"]) == (
        "forget",
        gone,
        "dpo",
        "erasure request 42",
    )
    assert line["key_shredded"] is True
    assert any(r.startswith(f"scratch of the tree runs/{gone}") for r in line["removed"])
    assert any(planner in run for run in line["runs"])

    # Replay: the kept pipeline replays with the deployment's keys; the forgotten one
    # cannot even be read.
    replayer = Replayer(workflows=[], plugins=[LittleWorkflowPlugin(data_dir, [definition])])
    ok = await replayer.replay_workflow(_copy(histories[kept]), raise_on_replay_failure=False)
    assert ok.replay_failure is None, ok.replay_failure
    failed = await replayer.replay_workflow(_copy(histories[gone]), raise_on_replay_failure=False)
    assert failed.replay_failure is not None


def _copy(history: WorkflowHistory) -> WorkflowHistory:
    return WorkflowHistory.from_json(history.workflow_id, history.to_json())


async def test_forget_names_the_tree_to_forget_for_a_sub_run(
    dev_env: WorkflowEnvironment, data_dir: Path
) -> None:
    code, _, err = await cli(
        dev_env, "forget", "pipeline_x/sub-runs/run_review@1", "--data-dir", str(data_dir),
        "--by", "dpo", "--why", "request",
    )  # fmt: skip
    assert code == 1
    assert "is part of the run tree pipeline_x" in err and "forget pipeline_x" in err
    assert not (data_dir / ".lw" / "keys").exists()
