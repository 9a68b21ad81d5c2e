"""The HTTP/1.x a forward proxy reads: request and response heads, and its answers.

The proxy reads only heads (bounded), never bodies: after a forwarded request's head
it relays bytes as they come, and since it asks the server to close after one
response (``Connection: close`` both ways) a body is never mistaken for a next
request. Standard library only (the proxy's process imports it).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

#: The most bytes of a request or response head.
MAX_HEAD = 64 * 1024
#: Headers that concern one hop (RFC 9110 section 7.6.1) and never go on.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "proxy-connection",
        "keep-alive",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "upgrade",
    }
)


class BadRequest(ValueError):
    """A request the proxy cannot read; the message is the answer's body."""


@dataclass(frozen=True, slots=True)
class Head:
    """A request's or response's first line and headers."""

    first: tuple[str, str, str]
    headers: tuple[tuple[str, str], ...]

    def header(self, name: str) -> str | None:
        lowered = name.lower()
        found = [value for key, value in self.headers if key.lower() == lowered]
        if len(found) > 1:
            raise BadRequest(f"the request has {len(found)} {name} headers")
        return found[0] if found else None


def parse_head(data: bytes) -> Head:
    """A head ending in an empty line; :class:`BadRequest` for anything else."""
    try:
        text = data.decode("iso-8859-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        raise BadRequest("the head is not text") from None
    lines = text.split("\r\n")
    if len(lines) < 3 or lines[-1] or lines[-2]:
        raise BadRequest("the head does not end with an empty line")
    if any(c in line for line in lines for c in "\r\n\0"):
        # A bare line feed another parser takes for a line end would hide a header.
        raise BadRequest("the head holds a bare CR, LF or NUL")
    parts = lines[0].split(" ", 2)
    if len(parts) != 3 or not all(parts[:2]):
        raise BadRequest("the first line is not 'METHOD TARGET HTTP/1.1'")
    headers: list[tuple[str, str]] = []
    for line in lines[1:-2]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip() or any(c in name for c in " \t"):
            raise BadRequest("a header line is malformed")
        headers.append((name, value.strip()))
    first = (parts[0], parts[1], parts[2])
    return Head(first, tuple(headers))


@dataclass(frozen=True, slots=True)
class Target:
    """Where a request goes: its host text, port and (forwarded requests) path."""

    host: str
    port: int
    path: str = ""


def connect_target(head: Head) -> Target:
    """The authority of ``CONNECT host:port``."""
    _method, target, version = head.first
    if not version.startswith("HTTP/1."):
        raise BadRequest("only HTTP/1.x is spoken here")
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise BadRequest("CONNECT needs host:port")
    if host.startswith("[") != host.endswith("]"):
        raise BadRequest("an IPv6 literal goes in brackets")
    return Target(host, int(port))


def forward_target(head: Head) -> Target:
    """The absolute URI of a forwarded request (``GET http://host/path HTTP/1.1``)."""
    _method, target, version = head.first
    if not version.startswith("HTTP/1."):
        raise BadRequest("only HTTP/1.x is spoken here")
    if not target.lower().startswith(("http://", "https://")):
        raise BadRequest(
            "this is a forward proxy: send absolute URIs (http://host/path) or CONNECT "
            "host:port (the proxy variables make clients do so)"
        )
    try:
        url = urlsplit(target)
        port = url.port
    except ValueError:
        raise BadRequest("the URI's host or port cannot be read") from None
    if url.scheme.lower() != "http":
        raise BadRequest(
            "send https:// requests through CONNECT (clients do when HTTPS_PROXY is set)"
        )
    if url.username is not None or url.password is not None:
        raise BadRequest("credentials in the URI are not forwarded; send an Authorization header")
    netloc = url.netloc
    host = netloc.rsplit(":", 1)[0] if not netloc.endswith("]") else netloc
    if not host:
        raise BadRequest("the URI names no host")
    path = url.path or "/"
    if url.query:
        path += "?" + url.query
    return Target(host, port or 80, path)


def body_length(head: Head) -> int | None:
    """How many body bytes follow a request's head (0 without ``Content-Length`` or
    ``Transfer-Encoding``); None for a chunked body, which the proxy relays chunk by
    chunk up to its last chunk and trailers (:func:`chunk_size`), never past them.
    :class:`BadRequest` for a body whose end another parser could read elsewhere: a
    ``Transfer-Encoding`` whose last coding is not ``chunked`` (the body would run to
    the connection's end), one beside a ``Content-Length`` (which of the two a
    server believes decides where its next request starts), or a ``Connection``
    header naming either (or ``Host``), which would have them dropped on the way."""
    named = {n.strip().lower() for n in (head.header("Connection") or "").split(",")}
    framing = named & {"content-length", "transfer-encoding", "host"}
    if framing:
        # The proxy would drop them (hop-by-hop) and the server read the body as a
        # next request.
        raise BadRequest(f"the Connection header names {', '.join(sorted(framing))}")
    codings = head.header("Transfer-Encoding")
    value = head.header("Content-Length")
    if codings is not None:
        names = [c.strip().lower() for c in codings.split(",")]
        if names[-1] != "chunked" or names.count("chunked") != 1 or not all(names):
            raise BadRequest(
                f"Transfer-Encoding {codings!r}: a request body's last coding must be chunked"
            )
        if value is not None:
            raise BadRequest("the request has both Transfer-Encoding and Content-Length")
        return None
    if value is None:
        return 0
    if not value.isdigit() or not value.isascii():
        raise BadRequest("the Content-Length is not a number")
    return int(value)


#: The longest chunk-size line (size and extensions) the proxy reads.
MAX_CHUNK_LINE = 4096
_HEX = frozenset("0123456789abcdefABCDEF")


def chunk_size(line: bytes) -> int:
    """The size a chunk-size line (``1a;ext=v\r\n``) announces; :class:`BadRequest`
    for anything another parser could read another way."""
    text = line.decode("iso-8859-1")
    if not text.endswith("\r\n") or any(c in text[:-2] for c in "\r\n\0"):
        raise BadRequest("a chunk-size line is malformed")
    digits, _, _extensions = text[:-2].partition(";")
    digits = digits.rstrip(" \t")
    if not digits or len(digits) > 16 or not set(digits) <= _HEX:
        raise BadRequest("a chunk size is not a hexadecimal number")
    return int(digits, 16)


def trailer_line(line: bytes) -> bool:
    """Whether ``line`` (with its CRLF) ends a chunked body's trailers (the empty
    line); :class:`BadRequest` for a line that is not a header field."""
    if line == b"\r\n":
        return True
    text = line.decode("iso-8859-1")[:-2]
    name, sep, _ = text.partition(":")
    if not sep or not name or any(c in text for c in "\r\n\0") or any(c in name for c in " \t"):
        raise BadRequest("a trailer line of the chunked body is malformed")
    return False


def host_header(head: Head) -> Target | None:
    value = head.header("Host")
    if value is None:
        return None
    host, sep, port = value.rpartition(":")
    if not sep or (host.startswith("[") and not host.endswith("]")) or not port.isdigit():
        return Target(value, 80)
    return Target(host, int(port))


def forwarded_head(head: Head, target: Target, host_value: str) -> bytes:
    """The request as the server gets it: origin-form, hop-by-hop headers removed,
    ``Host`` set, and one request per connection."""
    method, _, version = head.first
    named = head.header("Connection") or ""
    dropped = HOP_BY_HOP | {n.strip().lower() for n in named.split(",") if n.strip()}
    lines = [f"{method} {target.path} {version}", f"Host: {host_value}"]
    lines += [f"{k}: {v}" for k, v in head.headers if k.lower() not in dropped | {"host"}]
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("iso-8859-1")


def closing_response(head: Head) -> bytes:
    """A response head passed on with ``Connection: close`` (the proxy serves one
    request per connection)."""
    named = head.header("Connection") or ""
    dropped = {"connection", "proxy-connection", "keep-alive"} | {
        n.strip().lower() for n in named.split(",") if n.strip()
    }
    lines = [" ".join(head.first)]
    lines += [f"{k}: {v}" for k, v in head.headers if k.lower() not in dropped]
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("iso-8859-1")


def answer(status: int, reason: str, body: str) -> bytes:
    """The proxy's own answer (a refusal or an error), its reason phrase and body
    naming why, so a client that prints either says it."""
    data = (body.rstrip("\n") + "\n").encode("utf-8")
    phrase = reason.replace("\r", " ").replace("\n", " ")[:200]
    return (
        f"HTTP/1.1 {status} {phrase}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(data)}\r\n"
        "Connection: close\r\n"
        "X-Lw-Egress: refused\r\n\r\n"
    ).encode() + data
