"""A dream that reads a run after its tree was forgotten records only that it was
forgotten: nothing of what the run did reaches the dream's files, notes or agent."""

from __future__ import annotations

import uuid
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal.dreaming import reject_dream

from ._cli_support import cli
from ._dreaming_support import read_records
from ._hierarchy_support import lw_worker
from ._privacy_support import (
    holding,
    planting_model,
    run_dream,
    run_pipeline,
    secret_definition,
)


async def test_a_dream_after_forget_reads_nothing_of_the_run(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    definition = secret_definition()
    async with lw_worker(
        dev_env, data_dir, task_queue, [definition], planting_model(definition.id)
    ) as client:
        pipeline = await run_pipeline(client, task_queue, uuid.uuid4().hex[:8])
        code, out, err = await cli(
            dev_env, "forget", pipeline, "--data-dir", str(data_dir), "--by", "dpo",
            "--why", "request",
        )  # fmt: skip
        assert code == 0, out + err
        client.data_converter.payload_codec.ring.drop()  # type: ignore[union-attr]
        dream = await run_dream(client, task_queue, definition.id)
        await reject_dream(client, dream, "test", "cleanup")
    [record] = read_records(data_dir, dream)
    assert record.workflow_id == f"{pipeline}/sub-runs/run_{definition.id}@1"
    assert record.summary == "(this run was forgotten: its history can no longer be read)"
    assert (record.task, record.commands, record.memory_ops) == (None, (), ())
    assert not holding(data_dir / "runs" / dream, "strong candidate")
