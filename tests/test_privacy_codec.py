"""The payload codec on its own: the key a payload is sealed with is its run tree's,
named in its metadata and bound to the ciphertext; decode reads only that key; a
payload that is not sealed passes through (recorded plaintext histories replay); a
shredded key stops working in every process within the cache time."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import ActivitySerializationContext, WorkflowSerializationContext

from lw_temporal._privacy import (
    KEY_ID_FIELD,
    EncryptionCodec,
    KeyRing,
    KeyShredded,
    PayloadSealed,
    SealingConverter,
    tree_of,
    with_codec,
)
from lw_temporal.options import FileKeyStore


class CountingStore(FileKeyStore):
    """The file store, counting which keys it was asked for."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self.asked: list[str] = []

    async def get(self, key_id: str) -> bytes | None:
        self.asked.append(key_id)
        return await super().get(key_id)


def _payload(text: str) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=f'"{text}"'.encode())


def test_each_workflow_id_maps_to_its_trees_key() -> None:
    assert tree_of("pipeline_7f3a") == "pipeline_7f3a"
    assert tree_of("pipeline_7f3a/sub-runs/run_review@1/steps/step_2") == "pipeline_7f3a"
    assert tree_of("run_review@2026-11-30.a/steps/step_3") == "run_review@2026-11-30.a"
    assert tree_of("dream_review@scheduled-2026-12-01T00:00:00Z") == (
        "dream_review@scheduled-2026-12-01T00:00:00Z"
    )
    assert tree_of("lw-scratch-retention-2026-12-01T00:00:00Z").startswith("lw-scratch")
    assert tree_of("a/../../etc").startswith("h-")
    assert tree_of(None) == "_shared"


async def test_sealed_per_tree_and_decoded_by_the_key_the_metadata_names(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "keys")
    codec = EncryptionCodec(KeyRing(store))
    child = codec.with_context(
        WorkflowSerializationContext(namespace="default", workflow_id="pipeline_a/sub-runs/run_x@1")
    )
    activity = codec.with_context(
        ActivitySerializationContext(
            namespace="default", activity_id="1", activity_type="lw.bash",
            activity_task_queue="q", workflow_id="pipeline_b", workflow_type="lw.Orchestrator",
            is_local=False,
        )
    )  # fmt: skip
    [a] = await child.encode([_payload("alpha secret")])
    [b] = await activity.encode([_payload("beta secret")])
    assert a.metadata[KEY_ID_FIELD] == b"pipeline_a" and b.metadata[KEY_ID_FIELD] == b"pipeline_b"
    assert b"secret" not in a.data + b.data
    keys = tmp_path / "keys"
    assert sorted(p.name for p in keys.iterdir()) == ["pipeline_a.key", "pipeline_b.key"]
    assert stat.S_IMODE(keys.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in keys.iterdir())

    fresh = CountingStore(keys)  # another process: nothing cached
    reader = EncryptionCodec(KeyRing(fresh))
    assert (await reader.decode([a]))[0].data == b'"alpha secret"'
    assert fresh.asked == ["pipeline_a"], "decode reads the tree's own key, no other"
    plain = _payload("recorded before encryption")
    assert (await reader.decode([plain]))[0] == plain

    # The key id is bound to the ciphertext: relabelled, a payload does not open.
    relabelled = Payload(metadata={**a.metadata, KEY_ID_FIELD: b"pipeline_b"}, data=a.data)
    with pytest.raises(PayloadSealed, match="does not decrypt"):
        await reader.decode([relabelled])
    tampered = Payload(metadata=a.metadata, data=a.data[:-1] + bytes([a.data[-1] ^ 1]))
    with pytest.raises(PayloadSealed):
        await reader.decode([tampered])


async def test_the_converter_binds_once_per_workflow_and_seals_with_its_tree(
    tmp_path: Path,
) -> None:
    codec = EncryptionCodec(KeyRing(FileKeyStore(tmp_path)))
    converter = with_codec(pydantic_data_converter, codec)
    assert isinstance(converter, SealingConverter)
    step = "pipeline_a/sub-runs/run_x@1/steps/step_1"
    as_workflow = converter.with_context(
        WorkflowSerializationContext(namespace="default", workflow_id=step)
    )
    as_activity = converter.with_context(
        ActivitySerializationContext(
            namespace="default", activity_id="1", activity_type="lw.bash",
            activity_task_queue="q", workflow_id=step, workflow_type="lw.Worker",
            is_local=False,
        )
    )  # fmt: skip
    other = converter.with_context(
        WorkflowSerializationContext(namespace="default", workflow_id="pipeline_b")
    )
    assert as_workflow is as_activity, "one bound converter per workflow ID, kept"
    assert (
        other is not as_workflow
        and converter.with_context(
            WorkflowSerializationContext(namespace="default", workflow_id="pipeline_b")
        )
        is other
    )
    [a] = await as_activity.encode(["alpha secret"])
    [b] = await other.encode(["beta secret"])
    assert a.metadata[KEY_ID_FIELD] == b"pipeline_a" and b.metadata[KEY_ID_FIELD] == b"pipeline_b"
    assert await converter.decode([a, b], [str, str]) == ["alpha secret", "beta secret"]


async def test_a_shredded_key_stops_working_and_cannot_come_back(tmp_path: Path) -> None:
    store = FileKeyStore(tmp_path / "keys")
    codec = EncryptionCodec(KeyRing(store, ttl=0.0)).for_tree("pipeline_gone")
    [sealed] = await codec.encode([_payload("to forget")])
    assert (await codec.decode([sealed]))[0].data == b'"to forget"'
    assert await FileKeyStore(tmp_path / "keys").shred("pipeline_gone", by="dpo")
    with pytest.raises(PayloadSealed, match="was forgotten"):
        await codec.decode([sealed])
    with pytest.raises(KeyShredded):
        await codec.encode([_payload("a new run under the old ID")])
    assert not (tmp_path / "keys" / "pipeline_gone.key").exists()
    unknown = EncryptionCodec(KeyRing(FileKeyStore(tmp_path / "other")))
    with pytest.raises(PayloadSealed, match="does not hold"):
        await unknown.decode([sealed])
