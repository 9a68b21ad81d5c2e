"""Watching a running command from the event loop: reading its output pipes as they fill,
and noticing when its launcher exits or its pipes end, without a thread per command."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Callable

from ._output import OutputSink

_CHUNK = 1 << 16


class _Reader:
    """Drains one pipe into a sink from the event loop (no thread per stream)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        fd: int,
        sink: OutputSink,
        on_end: Callable[[], None],
    ) -> None:
        self.loop = loop
        self.fd = fd
        self.sink = sink
        self.on_end = on_end
        os.set_blocking(fd, False)
        loop.add_reader(fd, self._ready)

    def _ready(self) -> None:
        try:
            data = os.read(self.fd, _CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self.sink.write(data)
            return
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            self.loop.remove_reader(self.fd)
            os.close(self.fd)
            self.fd = -1
            self.on_end()


class _Watch:
    """The end of one launch, seen from the event loop by callbacks alone (no task,
    no thread): ``exited`` once the launcher has exited (its pidfd), ``drained`` once
    both its pipes are at EOF, ``ended`` once both, or 5 s after the exit when a
    descendant keeps a pipe open. The waiting task wakes once, not once per step."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        proc: subprocess.Popen[bytes],
        stdout: OutputSink,
        stderr: OutputSink,
    ) -> None:
        assert proc.stdout is not None and proc.stderr is not None
        self.loop = loop
        self.exited: asyncio.Future[None] = loop.create_future()
        self.drained: asyncio.Future[None] = loop.create_future()
        self.ended: asyncio.Future[None] = loop.create_future()
        self._open = 2
        self._grace: asyncio.TimerHandle | None = None
        self.readers = [
            _Reader(loop, os.dup(proc.stdout.fileno()), stdout, self._pipe_ended),
            _Reader(loop, os.dup(proc.stderr.fileno()), stderr, self._pipe_ended),
        ]
        proc.stdout.close()
        proc.stderr.close()
        self._pidfd = os.pidfd_open(proc.pid)
        loop.add_reader(self._pidfd, self._launcher_exited)

    def _pipe_ended(self) -> None:
        self._open -= 1
        if self._open == 0:
            _resolve(self.drained)
            if self.exited.done():
                _resolve(self.ended)

    def _launcher_exited(self) -> None:
        self._unwatch()
        _resolve(self.exited)
        if self.drained.done():
            _resolve(self.ended)
        else:
            self._grace = self.loop.call_later(_DRAIN_GRACE, _resolve, self.ended)

    def _unwatch(self) -> None:
        if self._pidfd >= 0:
            self.loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = -1

    def close(self) -> None:
        self._unwatch()
        if self._grace is not None:
            self._grace.cancel()
        for reader in self.readers:
            reader.close()


#: How long a launcher's pipes may stay open after it exited (a descendant holding
#: them) before whatever holds them is killed.
_DRAIN_GRACE = 5.0


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
