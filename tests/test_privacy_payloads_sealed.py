"""By default every payload lw's workflows and activities put in a history is sealed
with its tree's key: the server holds no byte of the run's text (inputs, tool results,
memory contents, summaries in user metadata, the result). A client without the keys
cannot read it and says how to get them; ``PrivacyOptions(encrypt=False)`` is the
explicit way to store payloads readable."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

import pytest
from google.protobuf import json_format
from temporalio.client import WorkflowHistory
from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult
from lw_temporal._privacy import KEY_ID_FIELD
from lw_temporal.options import PrivacyOptions

from ._cli_support import cli
from ._hierarchy_support import lw_worker
from ._privacy_support import (
    PLANTED,
    codec_server,
    payloads_in,
    planting_model,
    secret_definition,
)


def _payload_metadata(history: WorkflowHistory) -> list[dict[str, bytes]]:
    """The metadata of every payload in the history's events."""
    found: list[dict[str, bytes]] = []
    for event in history.events:
        for payload in payloads_in(json_format.MessageToDict(event)):
            found.append({k: base64.b64decode(v) for k, v in payload["metadata"].items()})
    return found


async def test_the_server_holds_no_byte_of_a_runs_text(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    definition = secret_definition()
    run = f"run_{definition.id}@{uuid.uuid4().hex[:6]}"
    async with lw_worker(
        dev_env, data_dir, task_queue, [definition], planting_model(definition.id)
    ) as client:
        result = await client.execute_workflow(
            "lw.Planner",
            AgentInput(task=f"review {PLANTED}"),
            id=run,
            task_queue=task_queue,
            result_type=AgentResult,
        )
        assert result.summary == f"reviewed {PLANTED}"
        history = await dev_env.client.get_workflow_handle(run).fetch_history()
        raw = b"".join(e.SerializeToString() for e in history.events)
        assert PLANTED.encode() not in raw
        metadata = _payload_metadata(history)
        sealed = [m for m in metadata if m["encoding"] == b"binary/encrypted"]
        assert len(sealed) >= 10
        assert {m[KEY_ID_FIELD] for m in sealed} == {run.encode()}
        # Only the SDK's own local-activity marker data (types, ids, times) is plain.
        markers = [e for e in history.events if e.HasField("marker_recorded_event_attributes")]
        assert len(metadata) - len(sealed) <= len(markers)
        summaries = [e for e in history.events if e.user_metadata.HasField("summary")]
        assert summaries and all(
            e.user_metadata.summary.metadata["encoding"] == b"binary/encrypted" for e in summaries
        )

        # A client without any codec cannot read the result.
        with pytest.raises(KeyError, match="binary/encrypted"):
            await dev_env.client.get_workflow_handle(run).result()
        # The CLI without keys shows the tree's states only; with them, everything.
        code, out, err = await cli(dev_env, "status", run, "--no-keys")
        assert code == 0, err
        assert out.splitlines()[-1] == f"{run}  finished"
        code, out, err = await cli(dev_env, "status", run, "--data-dir", str(data_dir))
        assert code == 0, err
        assert f"{run}  planner {definition.id}  finished  3 turns" in out
        assert f"reviewed {PLANTED}" in out

        # Through a codec server instead of the key store: a run started by the CLI has
        # its task sealed under its own tree's key, and its tree is shown whole.
        async with codec_server(data_dir) as (url, token):
            remote = ("--codec-endpoint", url, "--codec-auth", f"Bearer {token}")
            code, out, err = await cli(
                dev_env, "run", definition.id, f"review {PLANTED}", "--id", "remote",
                "--task-queue", task_queue, *remote,
            )  # fmt: skip
            assert code == 0, out + err
            assert f"run_{definition.id}@remote finished in " in out and err == ""
            started = (
                (
                    await dev_env.client.get_workflow_handle(
                        f"run_{definition.id}@remote"
                    ).fetch_history()
                )
                .events[0]
                .workflow_execution_started_event_attributes.input.payloads[0]
            )
            assert started.metadata[KEY_ID_FIELD] == f"run_{definition.id}@remote".encode()
            code, out, err = await cli(dev_env, "status", run, *remote)
            assert code == 0 and f"reviewed {PLANTED}" in out, out + err


async def test_encryption_is_off_only_by_explicit_choice(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    definition = secret_definition()
    run = f"run_{definition.id}@plain"
    async with lw_worker(
        dev_env, data_dir, task_queue, [definition], planting_model(definition.id),
        privacy=PrivacyOptions(encrypt=False),
    ) as client:  # fmt: skip
        await client.execute_workflow(
            "lw.Planner", AgentInput(task=f"review {PLANTED}"), id=run, task_queue=task_queue
        )
        history = await dev_env.client.get_workflow_handle(run).fetch_history()
    assert PLANTED.encode() in b"".join(e.SerializeToString() for e in history.events)
    assert not (data_dir / ".lw" / "keys").exists()
