"""One command's egress: its connections through the proxy, decided, relayed, audited.

A :class:`Session` belongs to one ``lw.bash`` command; its connections arrive on the
command's own unix socket pair (the sandbox's connect broker sends each one as a
descriptor, see ``_sandbox._netbroker``), so which command, agent and policy a
connection belongs to is which socket it came on: nothing the command sends can
claim another's. Each connection is one of:

* ``CONNECT host:port``: the name is checked against the policy, resolved by the
  proxy (or the test resolver override), every address checked
  (:mod:`._addresses`), one of them connected to (no second lookup), ``200``
  answered; the tunnel must then carry TLS whose ClientHello's server name, when it
  has one, is the CONNECT host (:mod:`._tls`; relaying is :mod:`._relay`);
* an absolute-URI request (``GET http://host/path``): checked the same way, its
  ``Host`` header must name the same host, and it goes on in origin form with
  ``Connection: close`` and its own body only (one request per connection).

A refusal answers ``403`` (``400`` for what cannot be read), its reason phrase and
body naming the rule, and is kept as a notice the command's result shows. Limits
per command: connections, bytes both ways together, and each connection's duration.
Standard library only (this runs in the proxy's own process, :mod:`._server`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import os
import socket
import stat
from pathlib import Path
from typing import Any

from . import _http
from ._addresses import loopback_only, refusal_here
from ._audit import AuditLog, now
from ._patterns import Host, PatternError, first_match, request_host
from ._relay import (
    Attempt,
    LimitReached,
    Refused,
    Relay,
    SessionConfig,
    _shown,
)
from ._stream import Stream

#: Message kinds on a command's socket pair (the broker's side is ``_netbroker``).
CONNECTION, DIRECT = b"c", b"d"
#: Why an ``open`` line that no last line followed is all the log has.
OPEN_REASON = "connected; no end recorded: the egress proxy ended first (bytes not counted)"
#: How many hosts and notices a result lists.
MAX_LISTED = 20
_LABELS = {"http": "request", "connect": "CONNECT"}


class Session(Relay):
    """The connections of one command (see the module docstring)."""

    def __init__(self, config: SessionConfig, channel: socket.socket) -> None:
        self.config = config
        self.channel = channel
        self.log = AuditLog(Path(config.log_path))
        self.tasks: set[asyncio.Task[None]] = set()
        self.attempts = self.allowed = self.refused = 0
        self.bytes_sent = self.bytes_received = 0
        self.logged = self.omitted = 0
        self.hosts: list[str] = []
        self.notices: list[str] = []
        self.notices_omitted = 0
        self.closed = False
        self._loop = asyncio.get_running_loop()

    # -- intake ---------------------------------------------------------------------
    def start(self) -> None:
        self.channel.setblocking(False)
        self._loop.add_reader(self.channel.fileno(), self._ready)

    def _ready(self) -> None:
        while not self.closed:
            try:
                message, fds, _, _ = socket.recv_fds(self.channel, 4096, 4)
            except BlockingIOError:
                return
            except OSError:
                message, fds = b"", []
            if not message and not fds:
                self._loop.remove_reader(self.channel.fileno())
                return
            if message[:1] == DIRECT and not fds:
                self._direct(message[1:])
            for fd in fds:
                self._admit(fd)

    def _admit(self, fd: int) -> None:
        self.attempts += 1
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                raise OSError("not a socket")
            sock = socket.socket(fileno=fd)
        except OSError:
            os.close(fd)
            return
        if sock.type != socket.SOCK_STREAM:
            sock.close()
            return
        task = self._loop.create_task(self._serve(sock, self.attempts))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _direct(self, data: bytes) -> None:
        self.attempts += 1
        try:
            event = json.loads(data)
            address, port = str(event["address"]), int(event["port"])
        except (ValueError, KeyError, TypeError):
            return
        attempt = Attempt(kind="direct", host=_shown(address), port=port, address=_shown(address))
        self._refuse(
            attempt,
            f"direct connection to {attempt.host}:{port} refused: commands reach the network "
            "only through the proxy (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY)",
        )
        self._finish(attempt)

    # -- one connection ---------------------------------------------------------------
    async def _serve(self, sock: socket.socket, ordinal: int) -> None:
        """One connection, the command's ``ordinal``-th attempt: past the limit it is
        refused before its request is read, so it holds none of the proxy's memory."""
        attempt = Attempt(ordinal=ordinal)
        client = Stream(sock)
        upstream: Stream | None = None
        try:
            if ordinal > self.config.max_connections:
                raise Refused(
                    429,
                    f"the command's limit of {self.config.max_connections} network "
                    "connections is reached",
                )
            head = await self._head(client)
            if head.first[0].upper() == "CONNECT":
                attempt.kind = "connect"
                target = _http.connect_target(head)
                host = self._check(attempt, target.host, target.port)
                upstream = await self._open(attempt, host, target.port)
                self._opened(attempt)
                await client.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await asyncio.wait_for(
                    self._tunnel(attempt, host, client, upstream), self.config.max_seconds
                )
            else:
                attempt.kind = "http"
                target = _http.forward_target(head)
                host = self._check(attempt, target.host, target.port)
                named = _http.host_header(head)
                if named is not None:
                    try:
                        same = request_host(named.host) == host and named.port == target.port
                    except PatternError:
                        same = False
                    if not same:
                        raise Refused(
                            403,
                            f"the Host header ({_shown(head.header('Host') or '')}) does not "
                            f"name the request's host ({host}:{target.port})",
                        )
                _http.body_length(head)  # a body whose end is unclear never goes on
                upstream = await self._open(attempt, host, target.port)
                self._opened(attempt)
                value = str(host) if target.port == 80 else f"{host}:{target.port}"
                forwarded = _http.forwarded_head(head, target, value)
                await self._send(attempt, upstream, forwarded, received=False)
                await asyncio.wait_for(
                    self._forward(attempt, head, client, upstream), self.config.max_seconds
                )
        except Refused as refused:
            self._refuse(attempt, refused.text)
            reason = "Forbidden" if refused.status == 403 else "Refused"
            answer = _http.answer(refused.status, f"{reason} ({refused.text})", refused.text)
            with contextlib.suppress(OSError, TimeoutError):
                await asyncio.wait_for(client.write(answer), 5)
        except _http.BadRequest as bad:
            self._refuse(attempt, f"bad request: {bad}")
            answer = _http.answer(400, "Bad Request", f"lw-egress: {bad}")
            with contextlib.suppress(OSError, TimeoutError):
                await asyncio.wait_for(client.write(answer), 5)
        except LimitReached:
            attempt.reason = self._bytes_limit()
            self._notice(f"{attempt.host}:{attempt.port} stopped: {attempt.reason}")
        except TimeoutError:
            attempt.reason = (
                f"closed after {self.config.max_seconds:g}s (the limit of one connection)"
            )
        except (OSError, EOFError, ValueError) as err:
            attempt.reason = attempt.reason or f"ended: {type(err).__name__}"
        except asyncio.CancelledError:
            attempt.reason = attempt.reason or "the command ended"
            raise
        finally:
            for end in (client, upstream):
                if end is not None:
                    end.close()
            self._finish(attempt)

    async def _head(self, client: Stream) -> _http.Head:
        try:
            data = await asyncio.wait_for(
                client.readuntil(b"\r\n\r\n", _http.MAX_HEAD), self.config.head_timeout
            )
        except ValueError:
            raise _http.BadRequest(f"the request head is over {_http.MAX_HEAD} bytes") from None
        except (EOFError, TimeoutError):
            raise _http.BadRequest("no request head arrived") from None
        return _http.parse_head(data)

    def _check(self, attempt: Attempt, text: str, port: int) -> Host:
        """The request's host, once the command's limits and its policy allow it."""
        attempt.host, attempt.port = _shown(text), port
        try:
            host = request_host(text)
        except PatternError as err:
            raise Refused(400, f"{attempt.host!r} is not a host name: {err}") from None
        attempt.host = str(host)
        if self.bytes_sent + self.bytes_received >= self.config.max_bytes:
            raise Refused(429, f"{host}:{port}: {self._bytes_limit()}")
        rule = first_match(self.config.rules, host, port)
        if rule is None:
            allowed = ", ".join(r.text for r in self.config.rules)
            if host.ip is not None:
                raise Refused(
                    403,
                    f"{host}:{port} is an IP address; the network policy allows hosts by "
                    f"name (allowed: {allowed})",
                )
            raise Refused(
                403, f"{host}:{port} is not in this agent's network policy (allowed: {allowed})"
            )
        attempt.rule = rule.text
        return host

    async def _addresses(
        self, host: Host, port: int
    ) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
        if host.ip is not None:
            return [host.ip]
        override = self.config.resolve.get(host.name)
        if override is not None:
            return [ipaddress.ip_address(override)]
        try:
            infos = await asyncio.wait_for(
                self._loop.getaddrinfo(host.name, port, type=socket.SOCK_STREAM),
                self.config.connect_timeout,
            )
        except (OSError, TimeoutError) as err:
            raise ConnectionError(f"{host} does not resolve ({err})") from None
        found: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = []
        for info in infos:
            ip = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
            if ip not in found:
                found.append(ip)
        return found

    async def _open(self, attempt: Attempt, host: Host, port: int) -> Stream:
        """Resolve, check every address, connect to one of them (the one checked)."""
        try:
            addresses = await self._addresses(host, port)
        except ConnectionError as err:
            attempt.decision, attempt.reason = "failed", str(err)
            raise Refused(502, f"{err}") from None
        overridden = host.ip is None and host.name in self.config.resolve
        for ip in addresses:
            why = refusal_here(ip)
            if why is not None and not (overridden and loopback_only(ip)):
                attempt.address = str(ip)  # the network log names it; the command is
                # not told: a name's answers are data from outside, and a refusal is no
                # network read (it does not taint), so it must carry none of them
                raise Refused(
                    403,
                    f"{host} resolves to a refused address ({why}): the proxy never "
                    "connects to this host's own, private, loopback, link-local, CGNAT, "
                    "multicast or metadata addresses (the address is in the worker's "
                    "network log)",
                )
        last: Exception | None = None
        for ip in addresses:
            attempt.address = str(ip)
            family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setblocking(False)
            try:
                await asyncio.wait_for(
                    self._loop.sock_connect(sock, (str(ip), port)), self.config.connect_timeout
                )
            except (OSError, TimeoutError) as err:
                sock.close()
                last = err
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            attempt.decision = "allowed"
            return Stream(sock)
        attempt.decision = "failed"
        attempt.reason = f"{host}:{port} did not answer ({type(last).__name__}: {last})"
        raise Refused(502, attempt.reason)

    # -- relaying ---------------------------------------------------------------------
    # -- bookkeeping -------------------------------------------------------------------
    def _refuse(self, attempt: Attempt, text: str) -> None:
        attempt.decision = "failed" if attempt.decision == "failed" else "refused"
        attempt.reason = text
        label = _LABELS.get(attempt.kind)
        self._notice(f"{label} refused: {text}" if label else text)

    def _notice(self, text: str) -> None:
        if len(self.notices) < MAX_LISTED:
            self.notices.append(text)
        else:
            self.notices_omitted += 1

    def _opened(self, attempt: Attempt) -> None:
        """An ``open`` line as a connection starts to relay: its last line comes when it
        ends, which a proxy that is killed (with its worker, or by the OOM killer)
        never writes, and the log must still name what the command reached."""
        if self.logged < self.config.max_log_lines:
            with contextlib.suppress(OSError):
                self.log.write(
                    {**attempt.record(self.config), "decision": "open", "reason": OPEN_REASON}
                )

    def _finish(self, attempt: Attempt) -> None:
        if attempt.decision == "allowed":
            self.allowed += 1
            shown = f"{attempt.host}:{attempt.port}"
            if shown not in self.hosts and len(self.hosts) < MAX_LISTED:
                self.hosts.append(shown)
        else:
            self.refused += 1
        if self.logged < self.config.max_log_lines:
            self.logged += 1
            with contextlib.suppress(OSError):
                self.log.write(attempt.record(self.config))
        else:
            self.omitted += 1

    async def close(self) -> dict[str, Any]:
        """End the command's network: stop taking connections, end those still open
        (their clients are gone), write the summary line, and sum it up."""
        self.closed = True
        with contextlib.suppress(ValueError, OSError):
            self._loop.remove_reader(self.channel.fileno())
        self.channel.close()
        for task in list(self.tasks):
            task.cancel()
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=5)
        summary = {
            "attempts": self.attempts,
            "allowed": self.allowed,
            "refused": self.refused,
            "bytes_sent": self.bytes_sent,
            "bytes_received": self.bytes_received,
            "hosts": self.hosts,
            "notices": self.notices,
            "notices_omitted": self.notices_omitted,
            "log_omitted": self.omitted,
        }
        with contextlib.suppress(OSError):
            self.log.write(
                {
                    "time": now(),
                    "workflow_id": self.config.workflow_id,
                    "run_id": self.config.run_id,
                    "command": self.config.command,
                    "kind": "command",
                    **{k: v for k, v in summary.items() if k != "notices"},
                }
            )
        self.log.close()
        return summary
