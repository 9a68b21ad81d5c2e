"""One connection through the proxy: its audit record, its refusals, its relaying.

Both directions run at once; the first failure of either (a refusal, the command's
byte limit, a peer gone) ends both. A tunnel carries TLS whose server name is the
tunnel's host; a forwarded request carries its own body and nothing after it.
Standard library only (the proxy's process imports it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from . import _http, _tls
from ._audit import now
from ._patterns import Host, HostRule, PatternError, parse_rule, request_host
from ._stream import Stream

_CHUNK = 256 * 1024
#: The most bytes of records the proxy passes between a HelloRetryRequest and the
#: second ClientHello (the early data a server skips there).
_MAX_SKIPPED = 1 << 20


class Refused(Exception):
    """A connection the proxy will not make: status, and the text the client gets."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text


class LimitReached(Exception):
    """The command used up its network bytes."""


@dataclass(frozen=True)
class SessionConfig:
    """What the worker tells the proxy about one command."""

    session: str
    workflow_id: str
    run_id: str
    command: str
    rules: tuple[HostRule, ...]
    log_path: str
    resolve: dict[str, str] = field(default_factory=dict)
    max_connections: int = 256
    max_bytes: int = 1 << 30
    max_seconds: float = 600.0
    max_log_lines: int = 1000
    head_timeout: float = 30.0
    connect_timeout: float = 15.0

    @classmethod
    def from_message(cls, message: dict[str, Any]) -> SessionConfig:
        limits = message.get("limits", {})
        return cls(
            session=str(message["session"]),
            workflow_id=str(message["workflow_id"]),
            run_id=str(message.get("run_id", "")),
            command=str(message["command"]),
            rules=tuple(parse_rule(p) for p in message["allow"]),
            log_path=str(message["log_path"]),
            resolve={str(k): str(v) for k, v in message.get("resolve", {}).items()},
            **{k: limits[k] for k in limits},
        )


@dataclass
class Attempt:
    """One connection attempt, as its audit line records it."""

    kind: str = "http"
    host: str = ""
    port: int = 0
    address: str = ""
    decision: str = "refused"
    reason: str = ""
    rule: str = ""
    bytes_sent: int = 0
    bytes_received: int = 0
    #: The command's how-many-th attempt: an ``open`` line and the attempt's last line
    #: share it (see ``_audit.records``).
    ordinal: int = 0
    started: float = field(default_factory=time.monotonic)

    def record(self, config: SessionConfig) -> dict[str, Any]:
        return {
            "time": now(),
            "workflow_id": config.workflow_id,
            "run_id": config.run_id,
            "command": config.command,
            "kind": self.kind,
            "host": self.host,
            "port": self.port,
            "address": self.address,
            "decision": self.decision,
            "reason": self.reason,
            "rule": self.rule,
            "bytes_sent": self.bytes_sent,
            "bytes_received": self.bytes_received,
            "seconds": round(time.monotonic() - self.started, 4),
            "attempt": self.ordinal,
        }


def _shown(text: str) -> str:
    """A host as a client wrote it, safe for a log and a terminal (escaped, capped)."""
    return text.encode("ascii", "backslashreplace").decode()[:255].replace("\n", "\\n")


class Relay:
    """The relaying half of a :class:`Session` (which holds the limits and counts)."""

    config: SessionConfig
    bytes_sent: int
    bytes_received: int

    def _refuse(self, attempt: Attempt, text: str) -> None:
        raise NotImplementedError

    def _bytes_limit(self) -> str:
        return f"the command's network limit of {self.config.max_bytes} bytes is reached"

    def _left(self) -> int:
        """Bytes the command may still move, both ways together."""
        return self.config.max_bytes - self.bytes_sent - self.bytes_received

    def _room(self, size: int) -> int:
        """How many of ``size`` bytes may go now: at the command's byte limit,
        :class:`LimitReached`."""
        room = self._left()
        if room <= 0:
            raise LimitReached
        return min(size, room)

    def _count(self, attempt: Attempt, size: int, *, received: bool) -> None:
        if received:
            attempt.bytes_received += size
            self.bytes_received += size
        else:
            attempt.bytes_sent += size
            self.bytes_sent += size

    async def _send(self, attempt: Attempt, sink: Stream, data: bytes, *, received: bool) -> None:
        """``data`` on, counted before it goes (cut at the byte limit, then
        :class:`LimitReached`)."""
        allowed = self._room(len(data)) if data else 0
        self._count(attempt, allowed, received=received)
        await sink.write(data[:allowed])
        if allowed < len(data):
            raise LimitReached

    def _mover(self, attempt: Attempt, *, received: bool) -> _Meter:
        return _Meter(self, attempt, received)

    async def _tunnel(self, attempt: Attempt, host: Host, client: Stream, upstream: Stream) -> None:
        """Both directions until both ended (half-closes passed on); the first
        failure of either ends both. The handshake goes through Python until the
        server's ServerHello (:meth:`_server_hellos`): after a HelloRetryRequest the
        client's next ClientHello is checked as its first was; after a real ServerHello
        (or whatever else the server sends) the kernel moves the rest."""
        retries: asyncio.Queue[bool] = asyncio.Queue()

        async def up() -> None:
            first = await client.read(_CHUNK)
            if first:
                await self._hello(attempt, host, client, upstream, first)
                while await retries.get():
                    data = await self._after_retry(attempt, host, client, upstream)
                    if not data:
                        break
                    await self._hello(attempt, host, client, upstream, data, retry=True)
                await client.splice_to(upstream, self._mover(attempt, received=False))
            upstream.end()

        async def down() -> None:
            await self._server_hellos(attempt, upstream, client, retries)
            await upstream.splice_to(client, self._mover(attempt, received=True))
            client.end()

        await _together(up(), down(), until_both=True)

    async def _hello(
        self,
        attempt: Attempt,
        host: Host,
        client: Stream,
        upstream: Stream,
        data: bytes,
        *,
        retry: bool = False,
    ) -> None:
        """The whole ClientHello on, once its server name is the CONNECT host (what
        came after it is read again later). A tunnel carries TLS: in plain text a
        client could name another host to the server (a ``Host`` header the proxy
        would not see), so anything else is refused. ``retry``: the ClientHello after
        a HelloRetryRequest, checked the same way."""
        which = " in its second ClientHello (after the server's HelloRetryRequest)" if retry else ""
        try:
            while (size := _tls.hello_length(data)) is None:
                more = await asyncio.wait_for(client.read(_CHUNK), self.config.head_timeout)
                if not more:
                    raise _tls.NotTLS("the client stopped inside its ClientHello")
                data += more
            name = _tls.server_name(data[:size])
        except (_tls.NotTLS, TimeoutError):
            self._refuse(
                attempt,
                f"the tunnel to {host}:{attempt.port} does not carry TLS"
                f"{' after the HelloRetryRequest' if retry else ''}: tunnels are for TLS (send "
                "plain http:// requests to the proxy as they are)",
            )
            raise OSError("not TLS") from None
        except _tls.HiddenName as err:
            self._refuse(attempt, f"TLS to {host}:{attempt.port}{which}: {err}")
            raise OSError("hidden server name") from None
        except ValueError as err:
            self._refuse(attempt, f"TLS to {host}{which}: the ClientHello cannot be read ({err})")
            raise OSError("bad ClientHello") from None
        if name is not None:
            try:
                same = request_host(name) == host
            except PatternError:
                same = False
            if not same:
                self._refuse(
                    attempt,
                    f"TLS to {host}:{attempt.port} asks for {_shown(name)} (its SNI){which}: "
                    "a tunnel is for the name it was allowed as",
                )
                raise OSError("SNI mismatch")
        client.unread(data[size:])
        await self._send(attempt, upstream, data[:size], received=False)

    async def _after_retry(
        self, attempt: Attempt, host: Host, client: Stream, upstream: Stream
    ) -> bytes:
        """After a HelloRetryRequest: the records a server skips before the second
        ClientHello (ChangeCipherSpec, early data, an alert) on as they are, bounded;
        the bytes from the next handshake record on (``b""``: the client ended)."""
        data, skipped = b"", 0
        while not data or data[0] != _tls.HANDSHAKE:
            try:
                found = _tls.record(data)
            except _tls.NotTLS:
                found = (0, _MAX_SKIPPED + 1)  # not a TLS record: refused below
            if found is None:
                more = await asyncio.wait_for(client.read(_CHUNK), self.config.head_timeout)
                if not more:
                    return b""
                data += more
                continue
            end = found[1]
            skipped += end
            if skipped > _MAX_SKIPPED:
                self._refuse(
                    attempt,
                    f"the tunnel to {host}:{attempt.port} sends no second ClientHello after "
                    "the server's HelloRetryRequest: tunnels are for TLS",
                )
                raise OSError("no second ClientHello")
            await self._send(attempt, upstream, data[:end], received=False)
            data = data[end:]
        return data

    async def _server_hellos(
        self, attempt: Attempt, upstream: Stream, client: Stream, retries: asyncio.Queue[bool]
    ) -> None:
        """The server's records on, read in Python until its first handshake message
        that is not a HelloRetryRequest; each HelloRetryRequest is told to ``retries``
        (True: a ClientHello in the clear comes next), the end of them too (False),
        also when the server sends something else first or ends."""
        data, handshake, rest = bytearray(), bytearray(), 0  # rest: of a retry request
        done = False
        while not done:
            try:
                found = _tls.record(data)
            except _tls.NotTLS:
                break
            if found is None:
                more = await upstream.read(_CHUNK)
                if not more:
                    break
                data += more
                continue
            kind, end = found
            await self._send(attempt, client, bytes(data[:end]), received=True)
            if kind == _tls.HANDSHAKE:
                handshake += data[5:end]
            del data[:end]
            if kind == _tls.CHANGE_CIPHER_SPEC:
                continue
            done = kind != _tls.HANDSHAKE
            while not done:
                taken = min(rest, len(handshake))
                del handshake[:taken]
                rest -= taken
                size = None if rest else _tls.retry_request(handshake)
                if size is None:
                    done = len(handshake) > _tls.MAX_HELLO
                    break
                done = size == 0
                if size:
                    retries.put_nowait(True)
                    rest = size
        retries.put_nowait(False)
        if data:
            await self._send(attempt, client, bytes(data), received=True)

    async def _forward(
        self, attempt: Attempt, head: _http.Head, client: Stream, upstream: Stream
    ) -> None:
        """The request's own body on (``Content-Length`` bytes, none without a length,
        a chunked one up to its last chunk and trailers: a client cannot slip a second
        request, for another host, past the first's check), and the response back
        with ``Connection: close``; done when the response is."""

        async def up() -> None:
            length = _http.body_length(head)
            if length is None:
                await self._chunked(attempt, client, upstream)
            elif length:
                await client.splice_to(upstream, self._mover(attempt, received=False), length)

        async def down() -> None:
            while True:
                try:
                    data = await upstream.readuntil(b"\r\n\r\n", _http.MAX_HEAD)
                except ValueError:
                    raise Refused(502, "the server's response head is too long") from None
                except EOFError:
                    raise Refused(502, "the server closed without an answer") from None
                try:
                    response = _http.parse_head(data)
                except _http.BadRequest:
                    raise Refused(502, "the server's response cannot be read") from None
                status = response.first[1]
                if not (status.startswith("1") and status != "101"):
                    break
                await self._send(attempt, client, data, received=True)
            await self._send(attempt, client, _http.closing_response(response), received=True)
            await upstream.splice_to(client, self._mover(attempt, received=True))
            client.end()

        await _together(up(), down(), until_both=False)

    async def _chunked(self, attempt: Attempt, client: Stream, upstream: Stream) -> None:
        """A chunked body on, read as its framing says: each size line, that many
        bytes and their CRLF, then the last (empty) chunk's trailers up to the empty
        line; nothing after it goes on. Each line is checked before it goes on
        (:class:`_http.BadRequest` for broken framing)."""

        async def line(limit: int) -> bytes:
            try:
                return await client.readuntil(b"\r\n", limit)
            except ValueError:
                raise _http.BadRequest("a line of the chunked body is too long") from None

        while True:
            data = await line(_http.MAX_CHUNK_LINE)
            size = _http.chunk_size(data)
            await self._send(attempt, upstream, data, received=False)
            if not size:
                break
            await client.splice_to(upstream, self._mover(attempt, received=False), size)
            if await line(2) != b"\r\n":
                raise _http.BadRequest("a chunk does not end where its size says")
            await self._send(attempt, upstream, b"\r\n", received=False)
        trailers = 0
        while True:
            data = await line(_http.MAX_HEAD)
            ended = _http.trailer_line(data)
            trailers += len(data)
            if trailers > _http.MAX_HEAD:
                raise _http.BadRequest(f"the trailers are over {_http.MAX_HEAD} bytes")
            await self._send(attempt, upstream, data, received=False)
            if ended:
                return


@dataclass
class _Meter:
    """One direction of one connection, counted against its session's limit."""

    relay: Relay
    attempt: Attempt
    received: bool

    def room(self, size: int) -> int:
        return self.relay._room(size)

    def take(self, size: int) -> int:
        granted = max(0, min(size, self.relay._left()))
        self.relay._count(self.attempt, granted, received=self.received)
        return granted


async def _together(
    up: Coroutine[Any, Any, None], down: Coroutine[Any, Any, None], *, until_both: bool
) -> None:
    """Both directions of a connection: a failure of either ends both (raised); one
    ending normally waits for the other (``until_both``), or, once ``down`` ended,
    ends ``up`` too."""
    tasks = {"up": asyncio.ensure_future(up), "down": asyncio.ensure_future(down)}
    try:
        pending = set(tasks.values())
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # a failure ends both
            if not until_both and tasks["down"].done():
                return
    finally:
        for task in tasks.values():
            task.cancel()
