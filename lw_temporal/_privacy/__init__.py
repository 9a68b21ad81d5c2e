"""Privacy: payloads encrypted per run tree, and erasure of what a run left.

Modules by concern: ``_keys`` (key ids per tree, the key-store interface and its file
store), ``_codec`` (the payload codec), ``_sealed_failures`` (failure messages sealed
with the payloads), ``_registry`` (which key store serves which server
and namespace on this host, for a client command given no keys), ``_remote`` (a codec
served over HTTP, for a client without the key store), ``_server`` (the codec server
Temporal's UI and CLI call), ``_places`` (where the agents' runs leave text outside
memory: conversations, dream bookkeeping, run scratch; read and rewritten by
descriptor), ``_forget``, ``_forget_memory``, ``_forget_search`` and
``_forget_quarantine`` (erasing a run tree; the search index is scrubbed of what a
revert took back, the tree's held changes are dropped), ``_reach`` (a
redaction's reach beyond the memory file), ``_records`` (what those two report).
"""

from __future__ import annotations

import dataclasses

from temporalio.converter import DataConverter, DefaultFailureConverter, PayloadCodec

from .._ids import DataLayout
from . import (  # noqa: F401  (register their erasers: memory's runs before the others)
    _forget_memory,
    _forget_quarantine,
    _forget_search,
)
from ._codec import (
    ENCODING,
    KEY_ID_FIELD,
    EncryptionCodec,
    KeyRing,
    PayloadSealed,
    SealingConverter,
    sealed_by,
)
from ._keys import SHARED_KEY_ID, FileKeyStore, KeyShredded, KeyStore, tree_of
from ._sealed_failures import SealingFailureConverter, opened_message


def key_folder(layout: DataLayout) -> str:
    """Where the file key store keeps a deployment's keys: the memory root's
    bookkeeping, which every worker, client and codec server of it shares."""
    return str(layout.state / "keys")


def default_key_store(layout: DataLayout) -> FileKeyStore:
    return FileKeyStore(key_folder(layout))


def with_codec(converter: DataConverter, codec: PayloadCodec | None) -> DataConverter:
    """``converter`` sealing its payloads with ``codec`` (as it is without one)."""
    if codec is None:
        return converter
    fields = {f.name: getattr(converter, f.name) for f in dataclasses.fields(converter) if f.init}
    fields["payload_codec"] = codec
    if isinstance(codec, EncryptionCodec):
        if fields.get("failure_converter_class") is DefaultFailureConverter:
            # Failure messages and stack traces sealed too (._sealed_failures).
            fields["failure_converter_class"] = SealingFailureConverter
        if type(converter) is DataConverter:
            # Bound once per workflow ID, not cloned per payload (SealingConverter).
            return SealingConverter(**fields)
        return type(converter)(**fields)
    return dataclasses.replace(converter, payload_codec=codec)


__all__ = [
    "ENCODING",
    "KEY_ID_FIELD",
    "SHARED_KEY_ID",
    "EncryptionCodec",
    "FileKeyStore",
    "KeyRing",
    "KeyShredded",
    "KeyStore",
    "PayloadSealed",
    "SealingConverter",
    "SealingFailureConverter",
    "default_key_store",
    "key_folder",
    "opened_message",
    "sealed_by",
    "tree_of",
    "with_codec",
]
