"""``memory redact`` of a planted text reaches every copy the agents' runs left at rest:
after it, a search of the whole data dir finds the text in no conversation, no run
scratch (a dream's run files and records included) and no dream bookkeeping, and every
file that still holds it is named in the command's report, with the Temporal histories
of the trees that held it and the ``forget`` that erases them."""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal.dreaming import reject_dream

from ._hierarchy_support import lw_worker
from ._privacy_support import (
    PLANTED,
    holding,
    planting_model,
    run_dream,
    run_pipeline,
    secret_definition,
)


async def test_after_redact_the_text_is_nowhere_the_runs_put_it_or_named(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    definition = secret_definition()
    async with lw_worker(
        dev_env, data_dir, task_queue, [definition], planting_model(definition.id)
    ) as client:
        pipeline = await run_pipeline(client, task_queue, uuid.uuid4().hex[:8])
        dream = await run_dream(client, task_queue, definition.id)
        before = holding(data_dir)
        for place in (".lw/conversations/", "runs/pipeline_", f"runs/{dream}/", ".lw/dreaming/"):
            assert any(p.startswith(place) for p in before), (place, sorted(before))

        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "lw_temporal._cli", "memory", "redact",
            "--data-dir", str(data_dir), "--by", "dpo",
            f"workflow:{definition.id}", "people.md", PLANTED,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        raw_out, raw_err = await asyncio.wait_for(process.communicate(), 300)
        code, out, err = process.returncode, raw_out.decode(), raw_err.decode()
        assert code == 0, out + err
        await reject_dream(client, dream, "test", "cleanup")

    assert f"redacted workflow:{definition.id}:people.md by dpo" in out
    after = holding(data_dir)
    run_places = (".lw/conversations/", "runs/", ".lw/dreaming/")
    assert not [p for p in after if p.startswith(run_places)], sorted(after)
    for place in before - after:
        if place.startswith(run_places):
            assert f"changed  {_kind(place)} {place}" in out, place
    # Every file still holding it is named: a memory file by its store and path, any
    # other by its path under the data dir.
    dreaming = f"memory/workflows/memory.dreaming/{definition.id}/"
    for place in after:
        if place.startswith(dreaming):
            assert f"remains  memory file dreaming:{definition.id}:" in out, place
        else:
            assert f" {place}" in out, (place, out)
    assert f"remains  memory file dreaming:{definition.id}:notes.md" in out
    for tree in (pipeline, dream):
        assert f"remains  Temporal history {tree}: " in out
        assert f"lw-temporal forget {tree} erases them" in out
    assert (
        not (data_dir / "memory" / "workflows" / definition.id / "people.md")
        .read_text()
        .count(PLANTED)
    )


def _kind(place: str) -> str:
    if place.startswith(".lw/conversations/"):
        return "conversation"
    if place.startswith(".lw/dreaming/"):
        return "dream bookkeeping"
    return "run scratch"
