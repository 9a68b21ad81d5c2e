"""The payload codec: AES-256-GCM per run tree, chosen from the serialization context.

Temporal's Python SDK hands a codec that implements ``WithSerializationContext`` the
workflow a payload belongs to (``WorkflowSerializationContext`` for workflow inputs,
results, queries, updates and child workflows, with the child's ID;
``ActivitySerializationContext`` for activity inputs and results, with the calling
workflow's ID). ``with_context`` binds a copy of the codec to that workflow's tree, so
``encode`` seals with the tree's key and writes the key id into the payload's metadata
(``encryption-key-id``, beside ``encoding: binary/encrypted`` as Temporal's samples
do); ``decode`` reads the key the metadata names, and only that one. A payload that is
not ``binary/encrypted`` passes through decode unchanged, so histories recorded before
encryption (or by a client without keys) still replay.

The key id is also the ciphertext's associated data: a payload relabelled with another
tree's id does not decrypt. And a copy bound to a workflow opens only payloads of that
workflow's tree (or of the shared key, which the Temporal UI and CLI seal with, or of
the ID a Schedule started the run from): a client with namespace write access that
copies tree A's sealed payload into a run of tree B it starts gets ``PayloadSealed``
from B's worker, not A's text in B's agent. Readers of many trees' histories bind a
copy per run, or decode with no context at all.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Self, cast

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    DataConverter,
    PayloadCodec,
    SerializationContext,
    WithSerializationContext,
)

from ._keys import SHARED_KEY_ID, KeyShredded, KeyStore, check_key_id, tree_of

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

ENCODING = b"binary/encrypted"
KEY_ID_FIELD = "encryption-key-id"
_NONCE = 12
_TAG = 16  # AES-GCM's authentication tag
#: Keys one process keeps in memory at most (least recently used go first).
MAX_CACHED_KEYS = 1024
#: What a Temporal Schedule appends to the workflow ID of each run it starts
#: ("-" and the run's time in RFC 3339); the run's input was sealed for the ID before it.
_SCHEDULED = re.compile(r"-\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})\Z")


class PayloadSealed(ValueError):
    """An encrypted payload this process cannot open: its tree's key is shredded, or
    absent from the key store it was given, or the payload was altered."""


class ForeignPayload(PayloadSealed):
    """A sealed payload of another run tree, met in a workflow of this one: copied
    there from another run's history (a run opens only its own tree's payloads)."""


class NoKeysGiven(PayloadSealed):
    """A sealed payload met by a client given no keys at all, which has said so once
    already (views need not repeat it per payload)."""


class KeyRing:
    """The keys a process has read, kept ``ttl`` seconds each (then read again, so a
    key shredded elsewhere stops working here within ``ttl``), ``capacity`` at most."""

    def __init__(
        self, store: KeyStore, *, ttl: float = 1.0, capacity: int = MAX_CACHED_KEYS
    ) -> None:
        self.store = store
        self.ttl = ttl
        self.capacity = capacity
        self._keys: OrderedDict[str, tuple[AESGCM, float]] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}

    def drop(self, key_id: str | None = None) -> None:
        """Forget one cached key (every one without ``key_id``)."""
        if key_id is None:
            self._keys.clear()
        else:
            self._keys.pop(key_id, None)

    def _cached(self, key_id: str) -> AESGCM | None:
        hit = self._keys.get(key_id)
        if hit is None:
            return None
        if time.monotonic() - hit[1] > self.ttl:
            del self._keys[key_id]
            return None
        self._keys.move_to_end(key_id)
        return hit[0]

    def _remember(self, key_id: str, key: bytes) -> AESGCM:
        # Imported here: workflow code imports this package inside Temporal's sandbox,
        # where a native extension module must not be imported again.
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        cipher = AESGCM(key)
        self._keys[key_id] = (cipher, time.monotonic())
        self._keys.move_to_end(key_id)
        while len(self._keys) > self.capacity:
            self._keys.popitem(last=False)
        return cipher

    async def for_encode(self, key_id: str) -> AESGCM:
        cipher = self._cached(key_id)
        if cipher is not None:
            return cipher
        lock = self._locks.setdefault(key_id, asyncio.Lock())
        async with lock:  # one creation per tree and process, however many payloads wait
            cipher = self._cached(key_id)
            if cipher is None:
                cipher = self._remember(key_id, await self.store.create(key_id))
        self._locks.pop(key_id, None)
        return cipher

    async def for_decode(self, key_id: str) -> AESGCM:
        cipher = self._cached(key_id)
        if cipher is not None:
            return cipher
        key = await self.store.get(key_id)
        if key is None:
            if await self.store.shredded(key_id):
                raise PayloadSealed(str(KeyShredded(key_id)))
            raise PayloadSealed(
                f"payload sealed with the key of run tree {key_id!r}, which this key store "
                "does not hold: give this client the workers' key store (the same data "
                "dir or memory root, or the same KeyStore)"
            )
        return self._remember(key_id, key)


@dataclass(frozen=True)
class EncryptionCodec(PayloadCodec, WithSerializationContext):
    """Seals every payload with its run tree's key (see the module docstring).

    ``key_id`` is the tree this copy is bound to by :meth:`with_context`; a copy with
    no context uses the shared key (``_shared``), which ``forget`` cannot shred, and
    opens the payloads of every tree. A bound copy (``bound``) opens its own tree's,
    the shared key's and ``scheduled_from``'s (the tree of the ID a Schedule started
    its run from), and refuses any other tree's as :class:`ForeignPayload`.
    """

    ring: KeyRing
    key_id: str = field(default_factory=lambda: tree_of(None))
    bound: bool = False
    scheduled_from: str | None = None

    def with_context(self, context: SerializationContext) -> Self:
        workflow_id = getattr(context, "workflow_id", None)
        return self.for_tree(workflow_id if isinstance(workflow_id, str) else None)

    def for_tree(self, workflow_id: str | None) -> Self:
        """A copy that seals with ``workflow_id``'s tree key and opens only that
        tree's payloads (every tree's without a workflow)."""
        key_id, bound = tree_of(workflow_id), bool(workflow_id)
        scheduled = _SCHEDULED.search(workflow_id or "")
        base = tree_of(workflow_id[: scheduled.start()]) if workflow_id and scheduled else None
        if (key_id, bound, base) == (self.key_id, self.bound, self.scheduled_from):
            return self
        return dataclasses.replace(self, key_id=key_id, bound=bound, scheduled_from=base)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        if not payloads:
            return []
        cipher: AESGCM | None = None
        aad = self.key_id.encode()
        out: list[Payload] = []
        for payload in payloads:
            if payload.metadata.get("encoding") == ENCODING:
                out.append(payload)  # already sealed (a codec server asked twice)
                continue
            if cipher is None:
                cipher = await self.ring.for_encode(self.key_id)
            nonce = os.urandom(_NONCE)
            sealed = Payload(data=nonce + cipher.encrypt(nonce, payload.SerializeToString(), aad))
            # Set key by key: a map given to the constructor goes through a slow
            # Python-level update (about 3x the cost of this payload's whole sealing).
            metadata = sealed.metadata
            metadata["encoding"] = ENCODING
            metadata[KEY_ID_FIELD] = aad
            out.append(sealed)
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [await self.open(p) for p in payloads]

    async def open(self, payload: Payload) -> Payload:
        """One payload decoded: the plaintext one it seals, or itself when not sealed."""
        if payload.metadata.get("encoding") != ENCODING:
            return payload
        key_id = sealed_by(payload)
        if key_id is None:
            raise PayloadSealed("encrypted payload without an encryption-key-id")
        try:
            check_key_id(key_id)
        except ValueError as err:
            raise PayloadSealed(f"encrypted payload naming no run tree's key: {err}") from None
        if self.bound and key_id not in (self.key_id, SHARED_KEY_ID, self.scheduled_from):
            raise ForeignPayload(
                f"payload sealed for run tree {key_id!r} arrived in a workflow of another "
                f"run tree, {self.key_id!r}: a sealed payload opens only in its own tree "
                "(this one was copied from another run's history). Start the run with input "
                "of its own, through a client of this deployment"
            )
        data = payload.data
        if len(data) < _NONCE + _TAG:
            raise PayloadSealed(
                f"payload of run tree {key_id!r} is cut short ({len(data)} bytes, less than "
                "a nonce and a tag): altered"
            )
        cipher = await self.ring.for_decode(key_id)
        from cryptography.exceptions import InvalidTag

        try:
            plain = cipher.decrypt(data[:_NONCE], data[_NONCE:], key_id.encode())
        except InvalidTag:
            raise PayloadSealed(
                f"payload of run tree {key_id!r} does not decrypt with its key (altered, "
                "or sealed with another key of that name)"
            ) from None
        return Payload.FromString(plain)


def sealed_by(payload: Payload) -> str | None:
    """The tree whose key sealed ``payload`` (``None``: not sealed by this codec)."""
    if payload.metadata.get("encoding") != ENCODING:
        return None
    raw = payload.metadata.get(KEY_ID_FIELD)
    return raw.decode("utf-8", "replace") if raw else None


#: Run trees whose bound converter one converter keeps (then it starts over).
MAX_BOUND_CONVERTERS = 1024


@dataclass(frozen=True)
class SealingConverter(DataConverter):
    """A data converter whose codec is an :class:`EncryptionCodec`, bound to a
    workflow's tree once per workflow ID and kept.

    The SDK binds the converter to a context for every payload of a command whose
    context is not the workflow's own (an activity's input, a child's input and memo)
    and for every activity task: ``DataConverter.with_context`` clones the converter
    each time, and a clone builds a new payload and failure converter only to replace
    them. Only the codec reads the context here (its workflow ID), so one bound copy
    per workflow ID serves every such payload; with a payload or failure converter of
    its own that reads the context, the SDK's binding runs every time as before.
    """

    _bound: dict[str | None, DataConverter] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def with_context(self, context: SerializationContext) -> Self:
        codec = self.payload_codec
        if (
            not isinstance(codec, EncryptionCodec)
            or self.external_storage is not None
            or _reads_context(self.payload_converter, context)
            or _reads_context(self.failure_converter, context)
        ):
            return super().with_context(context)
        workflow_id = getattr(context, "workflow_id", None)
        key = workflow_id if isinstance(workflow_id, str) else None
        bound = self._bound.get(key)
        if bound is None:
            bound = super().with_context(context)
            if len(self._bound) >= MAX_BOUND_CONVERTERS:
                self._bound.clear()
            self._bound[key] = bound
        return cast(Self, bound)


def _reads_context(part: object, context: SerializationContext) -> bool:
    """Whether a converter part changes with the context (the SDK's own do not)."""
    return isinstance(part, WithSerializationContext) and part.with_context(context) is not part
