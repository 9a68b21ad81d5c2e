"""A sealed payload that was altered fails as sealed, saying so, whatever was changed:
its ciphertext (a bit, cut short, emptied), its key id (another tree's, one naming no
tree at all); it never decodes to something else, and every reader that shows a sealed
payload as sealed (status, a dream's reading of a run) gets the same error type."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload

from lw_temporal._privacy import KEY_ID_FIELD, EncryptionCodec, FileKeyStore, KeyRing, PayloadSealed


async def test_every_alteration_fails_as_sealed(tmp_path: Path) -> None:
    codec = EncryptionCodec(KeyRing(FileKeyStore(tmp_path / "keys")))
    [sealed] = await codec.for_tree("pipeline_a").encode(
        [Payload(metadata={"encoding": b"json/plain"}, data=b'"the review of a person"')]
    )
    await codec.for_tree("pipeline_b").encode([Payload(metadata={"encoding": b"json/plain"})])
    data, metadata = sealed.data, dict(sealed.metadata)
    altered = {
        "a flipped bit": (data[:20] + bytes([data[20] ^ 1]) + data[21:], metadata),
        "cut to its nonce": (data[:12], metadata),
        "cut short": (data[:5], metadata),
        "emptied": (b"", metadata),
        "another tree's id": (data, {**metadata, KEY_ID_FIELD: b"pipeline_b"}),
        "an id naming no tree": (data, {**metadata, KEY_ID_FIELD: b"../../etc/passwd"}),
        "no id": (data, {"encoding": b"binary/encrypted"}),
    }
    for what, (changed, meta) in altered.items():
        with pytest.raises(PayloadSealed):
            await codec.decode([Payload(metadata=meta, data=changed)])
            pytest.fail(f"{what}: decoded")
    assert (await codec.decode([sealed]))[0].data == b'"the review of a person"'
