"""The egress proxy's process: one per worker, outside every sandbox.

A child of the worker, started the first time a command with a network policy runs
(or at worker start when a definition has one), so a worker without policies never
starts it. Its own process, because relaying a download moves every byte through
Python: in the worker it would hold the event loop and the GIL that heartbeat every
activity, and a fault in it would be the worker's. It runs on the standard library
alone (``python -I -S``, this package loaded without ``lw_temporal``'s imports, see
:data:`BOOT`), so it starts in tens of milliseconds and holds no worker state.

The worker talks to it over one ``SOCK_SEQPACKET`` pair, one JSON message each way:

* ``{"op": "open", "session": ..., "workflow_id", "run_id", "command", "allow",
  "log_path", "resolve", "limits"}`` with the proxy's end of the command's socket
  pair attached (``SCM_RIGHTS``): the command's connections arrive on it;
* ``{"op": "close", "session": ...}`` once the command's processes are gone, answered
  by ``{"op": "closed", "session": ..., "summary": {...}}``.

It exits when the worker's end closes (the worker exited or died: the parent-death
signal covers a worker killed outright).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import signal
import socket
import sys
from typing import Any

from ._patterns import PatternError
from ._proxy import Session
from ._relay import SessionConfig

#: ``python -I -S -c BOOT <this folder> <control fd>``: the package's modules without
#: running ``lw_temporal/__init__`` (which imports the worker's dependencies).
BOOT = (
    "import sys, types; p = types.ModuleType('lw_egress'); p.__path__ = [sys.argv[1]]; "
    "sys.modules['lw_egress'] = p; from lw_egress._server import main; main()"
)
_PR_SET_PDEATHSIG = 1
_MAX_MESSAGE = 1 << 20


class Server:
    def __init__(self, control: socket.socket) -> None:
        self.control = control
        self.sessions: dict[str, Session] = {}
        self.loop = asyncio.get_running_loop()
        self.ended = self.loop.create_future()

    def start(self) -> None:
        self.control.setblocking(False)
        self.loop.add_reader(self.control.fileno(), self._ready)

    def _ready(self) -> None:
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self.control, _MAX_MESSAGE, 2)
            except BlockingIOError:
                return
            except OSError:
                data, fds = b"", []
            if not data:
                for fd in fds:
                    socket.close(fd)
                self.loop.remove_reader(self.control.fileno())
                if not self.ended.done():
                    self.ended.set_result(None)
                return
            try:
                self._handle(json.loads(data), fds)
            except (ValueError, KeyError, TypeError, PatternError) as err:
                for fd in fds:
                    socket.close(fd)
                print(f"lw-egress: a message was not understood: {err}", file=sys.stderr)

    def _handle(self, message: dict[str, Any], fds: list[int]) -> None:
        op = message.get("op")
        if op == "open":
            if len(fds) != 1:
                raise ValueError("open needs the command's socket")
            config = SessionConfig.from_message(message)
            session = Session(config, socket.socket(fileno=fds[0]))
            self.sessions[config.session] = session
            session.start()
        elif op == "close":
            self.loop.create_task(self._close(str(message["session"])))
        else:
            raise ValueError(f"unknown op {op!r}")

    def _stop(self) -> None:
        if not self.ended.done():
            self.ended.set_result(None)

    async def _close(self, name: str) -> None:
        session = self.sessions.pop(name, None)
        summary = await session.close() if session is not None else {}
        reply = json.dumps({"op": "closed", "session": name, "summary": summary}).encode()
        with contextlib.suppress(OSError):
            await self.loop.sock_sendall(self.control, reply)

    async def run(self) -> None:
        self.start()
        # SIGTERM (the worker stopping) ends the sessions as an EOF does.
        self.loop.add_signal_handler(signal.SIGTERM, self._stop)
        await self.ended
        for session in list(self.sessions.values()):
            await session.close()


async def _serve(fd: int) -> None:
    server = Server(socket.socket(fileno=fd))
    await server.run()


def main() -> None:
    fd = int(sys.argv[-1])
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    asyncio.run(_serve(fd))
