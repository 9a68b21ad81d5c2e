"""An lw workflow vouches for its own run in each activity it schedules.

Confirming a regular activity's caller with the server (``_callers``) costs a describe
of every calling run, one per agent: about a sixth of a small agent's cost. Yet a
workflow this deployment runs knows from its own task what the describe would say (its
ID, run, type, chain and parent, all set by the server), and only a worker of this
deployment runs lw workflow code. So the plugin's workflow interceptor stamps every
activity with those facts and an HMAC of them under a key only the deployment's
workers hold (a file in the data dir's bookkeeping, never mounted, made by the first
worker: workers sharing a data dir share it). The activity side checks the MAC against
``activity.info()``: a stamp proves the run is the one a worker of ours ran, with that
chain and parent, and the caller check then takes the path a local activity takes
(describing only the parent, once per parent).

What a client with namespace access can do with a stamp: read it from a history (the
header is in ``ActivityTaskScheduled``), but it is bound to that run's workflow ID and
run id, which the server sets for the activity of any other run, so it vouches for
nothing else. A missing or wrong stamp is no refusal: the caller is described as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio import activity, workflow
from temporalio.api.common.v1 import Payload
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
    StartActivityInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

#: The activity header holding the calling run's stamp.
CALLER_HEADER = "lw-caller"

_KEY_BYTES = 32

_stamp: ContextVar[bytes | None] = ContextVar("lw_caller_stamp", default=None)


@dataclass(frozen=True)
class Vouched:
    """What the calling run's stamp vouches for (the server set each of these)."""

    chain: str
    parent: str | None
    parent_run: str | None


class VouchKey:
    """The deployment's stamp key, read (or made) once per worker process."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "caller.key"
        self.key: bytes | None = None

    def load(self) -> bytes:
        """The key, made now if no worker made it yet (the first one wins)."""
        if self.key is None:
            self.key = _read(self.path) or _make(self.path)
        return self.key


def _read(path: Path) -> bytes | None:
    with contextlib.suppress(FileNotFoundError):
        key = path.read_bytes()
        return key if len(key) == _KEY_BYTES else None
    return None


def _make(path: Path) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(secrets.token_bytes(_KEY_BYTES))
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileExistsError):  # another worker's key wins
            os.link(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    key = _read(path)
    if key is None:
        raise OSError(f"caller key {path} is damaged: remove it and start the workers again")
    return key


def _mac(key: bytes, fields: list[str]) -> str:
    message = json.dumps(fields, separators=(",", ":")).encode("utf-8", "surrogateescape")
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def vouched(key: bytes | None) -> Vouched | None:
    """What the running activity's stamp vouches for, when it is a good stamp of the
    run ``activity.info()`` names under ``key``; ``None`` otherwise."""
    raw = _stamp.get()
    if raw is None or key is None:
        return None
    try:
        data = json.loads(raw)
        chain, parent, parent_run, mac = (data[k] for k in ("chain", "parent", "run", "mac"))
    except (ValueError, KeyError, TypeError):
        return None
    if not all(isinstance(v, str) for v in (chain, parent, parent_run, mac)) or not chain:
        return None
    info = activity.info()
    fields = [info.workflow_id or "", info.workflow_run_id or "", info.workflow_type or "",
              chain, parent, parent_run]  # fmt: skip
    if not hmac.compare_digest(_mac(key, fields), mac):
        return None
    return Vouched(chain=chain, parent=parent or None, parent_run=parent_run or None)


class VouchInterceptor(Interceptor):
    """Stamps each activity an lw workflow schedules; reads the stamp back for the
    activity's caller check."""

    def __init__(self, key: VouchKey) -> None:
        self.key = key

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _StampedActivity(next)

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        key = self.key

        class _Vouching(WorkflowInboundInterceptor):
            def init(self, outbound: WorkflowOutboundInterceptor) -> None:
                super().init(_VouchingOutbound(outbound, key))

        return _Vouching


class _StampedActivity(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        payload = input.headers.get(CALLER_HEADER)
        token = _stamp.set(None if payload is None else payload.data)
        try:
            return await self.next.execute_activity(input)
        finally:
            _stamp.reset(token)


class _VouchingOutbound(WorkflowOutboundInterceptor):
    def __init__(self, next: WorkflowOutboundInterceptor, key: VouchKey) -> None:
        super().__init__(next)
        self._key = key

    def start_activity(self, input: StartActivityInput) -> workflow.ActivityHandle[Any]:
        key = self._key.key  # loaded at the worker's start; none yet: no stamp
        if key is not None:
            info = workflow.info()
            parent = info.parent
            chain = info.first_execution_run_id or info.run_id
            pid, prun = ("", "") if parent is None else (parent.workflow_id, parent.run_id)
            fields = [info.workflow_id, info.run_id, info.workflow_type, chain, pid, prun]
            body = {"chain": chain, "parent": pid, "run": prun, "mac": _mac(key, fields)}
            data = json.dumps(body, separators=(",", ":")).encode()
            stamp = Payload(metadata={"encoding": b"binary/plain"}, data=data)
            input.headers = {**input.headers, CALLER_HEADER: stamp}
        return super().start_activity(input)
