"""A payload codec that asks a codec server, for a client that holds no keys.

It speaks the protocol of :mod:`._server` (Temporal's): ``POST <endpoint>/encode`` and
``/decode`` with ``{"payloads": [...]}``, ``X-Namespace`` and the given
``Authorization``; bound to a workflow by the serialization context, it names the
workflow (``X-Lw-Workflow-Id``) so the server seals with that tree's key.
"""

from __future__ import annotations

import asyncio
import dataclasses
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Self

from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.converter import PayloadCodec, SerializationContext, WithSerializationContext

from ._codec import PayloadSealed
from ._server import WORKFLOW_HEADER

_TIMEOUT = 30.0


@dataclass(frozen=True)
class RemoteCodec(PayloadCodec, WithSerializationContext):
    """Encode and decode through the codec server at ``endpoint``."""

    endpoint: str
    auth: str | None = None
    namespace: str = "default"
    workflow_id: str | None = None

    def with_context(self, context: SerializationContext) -> Self:
        workflow_id = getattr(context, "workflow_id", None)
        return dataclasses.replace(
            self, workflow_id=workflow_id if isinstance(workflow_id, str) else None
        )

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return await asyncio.to_thread(self._call, "encode", payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = await asyncio.to_thread(self._call, "decode", payloads)
        if any(p.metadata.get("encoding") == b"binary/encrypted" for p in out):
            raise PayloadSealed(
                f"the codec server at {self.endpoint} could not open a payload (its run "
                "tree was forgotten, or the server holds other keys)"
            )
        return out

    def _call(self, route: str, payloads: Sequence[Payload]) -> list[Payload]:
        if not payloads:
            return []
        body = json_format.MessageToJson(Payloads(payloads=payloads)).encode()
        headers = {"Content-Type": "application/json", "X-Namespace": self.namespace}
        if self.auth:
            headers["Authorization"] = self.auth
        if route == "encode" and self.workflow_id:
            headers[WORKFLOW_HEADER] = self.workflow_id
        url = self.endpoint.rstrip("/").replace("{namespace}", self.namespace) + f"/{route}"
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=_TIMEOUT) as response:
                raw = response.read()
        except urllib.error.HTTPError as err:
            detail = err.read().decode("utf-8", "replace").strip()
            raise PayloadSealed(f"codec server {url}: HTTP {err.code}: {detail}") from None
        except OSError as err:
            raise PayloadSealed(f"codec server {url} unreachable: {err}") from None
        return list(json_format.Parse(raw, Payloads()).payloads)
