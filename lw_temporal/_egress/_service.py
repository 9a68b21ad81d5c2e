"""The worker's side of the egress proxy: its process, and one session per command.

``lw.bash`` asks for a session before a command with a network policy runs: the
worker makes the command's unix socket pair, hands one end to the proxy with the
policy and limits (:mod:`._server`), and the other end goes into the sandbox, where
the connect broker sends the command's connections on it. Once the command's
processes are gone the session is closed and its summary becomes the result's
:class:`NetworkUse`. A command without a policy never reaches this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import subprocess
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._audit import log_path
from ._policy import NetworkPolicy
from ._server import BOOT
from ._use import NetworkUse

logger = logging.getLogger(__name__)
_FOLDER = Path(__file__).parent
#: How long closing a session may take (its connections are cancelled first).
_CLOSE_TIMEOUT = 30.0


@dataclass(frozen=True)
class ProxyLimits:
    """Per-command bounds of the proxy, and the test resolver override."""

    max_connections: int = 256
    max_bytes: int = 1 << 30
    max_connection_seconds: float = 600.0
    max_log_lines: int = 1000
    resolve: Mapping[str, str] = field(default_factory=dict)


@dataclass
class EgressSession:
    """One command's session: the end of its socket pair that goes into the sandbox."""

    name: str
    sandbox: socket.socket


class EgressService:
    """Starts the proxy's process on first use and keeps it for the worker's life."""

    def __init__(self, local_state: Path, limits: ProxyLimits | None = None) -> None:
        self.local_state = local_state
        self.limits = limits or ProxyLimits()
        self._proc: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def running(self) -> bool:
        return self._control is not None and self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start the proxy's process unless it runs (on the worker's event loop)."""
        if self.running:
            return
        self._reset("the egress proxy was restarted")
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", BOOT, str(_FOLDER), str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                close_fds=True,
                start_new_session=True,
            )
        except OSError:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        self._control, self._loop = ours, loop
        loop.add_reader(ours.fileno(), self._replies)

    async def begin(
        self, *, workflow_id: str, run_id: str, command: str, policy: NetworkPolicy
    ) -> EgressSession:
        """A session for one command; raises ``OSError`` when the proxy cannot start."""
        self.start()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        name = uuid.uuid4().hex
        limits = self.limits
        message = {
            "op": "open",
            "session": name,
            "workflow_id": workflow_id,
            "run_id": run_id,
            "command": command,
            "allow": list(policy.allow),
            "log_path": str(log_path(self.local_state, workflow_id)),
            "resolve": dict(limits.resolve),
            "limits": {
                "max_connections": limits.max_connections,
                "max_bytes": limits.max_bytes,
                "max_seconds": limits.max_connection_seconds,
                "max_log_lines": limits.max_log_lines,
            },
        }
        try:
            await self._send(json.dumps(message).encode(), [ours.fileno()])
        except BaseException:
            theirs.close()
            raise
        finally:
            ours.close()
        return EgressSession(name, theirs)

    async def end(self, session: EgressSession) -> NetworkUse:
        """Close a command's session (its processes are gone) and sum it up."""
        session.sandbox.close()
        if not self.running or self._loop is None:
            return NetworkUse(proxy_error="the egress proxy ended while the command ran")
        future: asyncio.Future[dict[str, Any]] = self._loop.create_future()
        self._pending[session.name] = future
        try:
            await self._send(json.dumps({"op": "close", "session": session.name}).encode(), [])
            summary = await asyncio.wait_for(asyncio.shield(future), _CLOSE_TIMEOUT)
        except (OSError, TimeoutError) as err:
            return NetworkUse(proxy_error=f"the egress proxy did not close the session ({err})")
        finally:
            self._pending.pop(session.name, None)
        if "proxy_error" in summary:
            return NetworkUse(proxy_error=str(summary["proxy_error"]))
        return NetworkUse.from_summary(summary)

    async def _send(self, data: bytes, fds: list[int]) -> None:
        if self._control is None or self._loop is None:
            raise OSError("the egress proxy is not running")
        control, loop = self._control, self._loop
        while True:
            try:
                socket.send_fds(control, [data], fds)
                return
            except BlockingIOError:
                ready = loop.create_future()
                loop.add_writer(control.fileno(), ready.set_result, None)
                try:
                    await ready
                finally:
                    loop.remove_writer(control.fileno())

    def _replies(self) -> None:
        control = self._control
        if control is None:
            return
        while True:
            try:
                data = control.recv(1 << 20)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                logger.warning("lw.bash: the egress proxy ended; it restarts at the next command")
                self._reset("the egress proxy ended while the command ran")
                return
            with contextlib.suppress(ValueError, KeyError, TypeError):
                message = json.loads(data)
                future = self._pending.get(str(message["session"]))
                if future is not None and not future.done():
                    future.set_result(dict(message.get("summary") or {}))

    def _reset(self, why: str) -> None:
        control, self._control = self._control, None
        if control is not None and self._loop is not None:
            with contextlib.suppress(ValueError, OSError):
                self._loop.remove_reader(control.fileno())
            control.close()
        for future in self._pending.values():
            if not future.done():
                future.set_result({"proxy_error": why})
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def stop(self) -> None:
        """End the proxy's process (at worker shutdown)."""
        self._reset("the worker stopped")
