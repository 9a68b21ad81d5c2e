"""A connected socket as the proxy uses it: heads read into a small buffer, bodies
moved by the kernel.

Everything after the heads goes socket to socket through a pipe with ``splice(2)``:
the bytes never enter Python, so the proxy relays at close to the speed of the
loopback itself (a 50 MB download through it, see ``benchmarks/egress.py``), and its
process holds no more than a pipe's worth of any connection. Standard library only
(the proxy's process imports it).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import socket
from typing import Protocol

#: The most bytes one ``splice`` moves (and the pipe holds).
_CHUNK = 1 << 20
_SPLICE = getattr(os, "SPLICE_F_MOVE", 1) | getattr(os, "SPLICE_F_NONBLOCK", 2)
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


class Meter(Protocol):
    """Who counts the bytes a :meth:`Stream.splice_to` moves, and bounds them."""

    def room(self, size: int) -> int:
        """How many of ``size`` bytes may move now (raises when none may)."""

    def take(self, size: int) -> int:
        """Count the part of ``size`` bytes that fits the bound, now (no other
        connection's bytes in between), and return it: only that part goes on."""


class Stream:
    """One non-blocking socket on the running loop."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.fd = sock.fileno()
        self.buffer = bytearray()
        self.loop = asyncio.get_running_loop()

    async def read(self, size: int) -> bytes:
        """Up to ``size`` bytes (what is buffered first); ``b""`` at EOF."""
        if self.buffer:
            data = bytes(self.buffer[:size])
            del self.buffer[:size]
            return data
        return await self.loop.sock_recv(self.sock, size)

    def unread(self, data: bytes) -> None:
        """Put ``data`` back in front of what comes next."""
        self.buffer[:0] = data

    async def readuntil(self, separator: bytes, limit: int) -> bytes:
        """Everything up to and with ``separator``; ``ValueError`` past ``limit``
        bytes without it, ``EOFError`` when the peer ends first."""
        while True:
            at = self.buffer.find(separator)
            if at >= 0:
                end = at + len(separator)
                data = bytes(self.buffer[:end])
                del self.buffer[:end]
                return data
            if len(self.buffer) > limit:
                raise ValueError(f"no {separator!r} within {limit} bytes")
            chunk = await self.loop.sock_recv(self.sock, 64 * 1024)
            if not chunk:
                raise EOFError("the peer ended before the separator")
            self.buffer += chunk

    async def write(self, data: bytes) -> None:
        await self.loop.sock_sendall(self.sock, data)

    def end(self) -> None:
        """No more bytes this way (the peer reads EOF; it may still answer)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.sock.close()

    async def splice_to(self, sink: Stream, meter: Meter, limit: int | None = None) -> None:
        """Move what comes (buffered bytes first) to ``sink`` until EOF or ``limit``
        bytes, each move no larger than ``meter.room`` allows. What a move brought is
        counted the moment it arrives (``meter.take``) and only the part within the
        bound goes on: connections that waited on their sockets at once each had room
        for the same remaining bytes."""
        left = limit
        if self.buffer:
            size = len(self.buffer) if left is None else min(left, len(self.buffer))
            data = await self.read(meter.room(size))
            taken = meter.take(len(data))
            await sink.write(data[:taken])
            if taken < len(data):
                meter.room(1)  # raises: the bound is reached
            if left is not None:
                left -= taken
        read_end, write_end = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            with contextlib.suppress(OSError):
                fcntl.fcntl(write_end, _F_SETPIPE_SZ, _CHUNK)
            while left is None or left > 0:
                want = meter.room(_CHUNK if left is None else min(_CHUNK, left))
                moved = await self._splice(self.fd, write_end, want, readable=True)
                if moved == 0:
                    return
                taken = meter.take(moved)  # the rest stays in the pipe, never sent
                if left is not None:
                    left -= taken
                rest = taken
                while rest:
                    rest -= await self._splice(read_end, sink.fd, rest, readable=False)
                if taken < moved:
                    meter.room(1)  # raises: the bound is reached
        finally:
            os.close(read_end)
            os.close(write_end)

    async def _splice(self, source: int, target: int, size: int, *, readable: bool) -> int:
        wait_on = source if readable else target
        while True:
            try:
                return os.splice(source, target, size, flags=_SPLICE)
            except BlockingIOError:
                await self._ready(wait_on, readable)

    async def _ready(self, fd: int, readable: bool) -> None:
        future: asyncio.Future[None] = self.loop.create_future()

        def wake() -> None:
            if not future.done():
                future.set_result(None)

        if readable:
            self.loop.add_reader(fd, wake)
        else:
            self.loop.add_writer(fd, wake)
        try:
            await future
        finally:
            if readable:
                self.loop.remove_reader(fd)
            else:
                self.loop.remove_writer(fd)
