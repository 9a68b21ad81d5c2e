"""The server name a TLS ClientHello asks for (SNI), read without a TLS library.

A CONNECT tunnel is allowed by its host name; a client that then asks the server
for another name (a CDN or a shared front end serving many names on one address:
"domain fronting") is refused. The ClientHello is the first thing a TLS client
sends, in the clear; this module collects it across records (bounded) and reads the
``server_name`` extension. A TLS 1.3 server that wants other key shares answers a
HelloRetryRequest (a ServerHello with a fixed random), and the client then sends a
second ClientHello, in the clear too: :func:`retry_request` tells the relay which
ServerHello is one, so that it checks that hello as well. Standard library only (the
proxy's process imports it).
"""

from __future__ import annotations

import struct

#: The most bytes of handshake the proxy collects to find the name.
MAX_HELLO = 64 * 1024
#: Record content types.
CHANGE_CIPHER_SPEC, HANDSHAKE = 0x14, 0x16
_HANDSHAKE, _CLIENT_HELLO, _SERVER_NAME, _HOST_NAME = HANDSHAKE, 0x01, 0x0000, 0x00
_SERVER_HELLO = 0x02
#: The random of a ServerHello that is a HelloRetryRequest (RFC 8446 4.1.3).
_RETRY_RANDOM = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")
#: The largest record a peer may send (a ciphertext's 2^14 + 256 bytes, with margin).
MAX_RECORD = (1 << 14) + 2048
#: Extensions that carry a server name the proxy cannot read: Encrypted Client Hello
#: (RFC 9849; its outer name may be the allowed one, the inner one, which a shared
#: front end serves, anything) and the draft encrypted SNI before it.
_HIDDEN_NAMES = {0xFE0D: "Encrypted Client Hello", 0xFFCE: "encrypted SNI"}


class HiddenName(ValueError):
    """A ClientHello whose real server name is encrypted: refused, saying so."""


class NotTLS(ValueError):
    """The bytes are not the start of a TLS handshake (the tunnel carries another
    protocol: nothing to check)."""


def looks_like_tls(data: bytes) -> bool:
    return len(data) >= 1 and data[0] == _HANDSHAKE


def record(data: bytes | bytearray) -> tuple[int, int] | None:
    """The first record in ``data``: (its content type, its end), None until it is
    whole; :class:`NotTLS` for a record no TLS peer sends."""
    if len(data) < 5:
        return None
    kind, length = data[0], int.from_bytes(data[3:5], "big")
    if not 0x14 <= kind <= 0x18 or length > MAX_RECORD:
        raise NotTLS("not a TLS record")
    return (kind, 5 + length) if len(data) >= 5 + length else None


def retry_request(handshake: bytes | bytearray) -> int | None:
    """The size of the HelloRetryRequest the server's handshake bytes (the payloads
    of its handshake records, as they came) open with, 0 when they open with anything
    else (a real ServerHello: no ClientHello in the clear follows); None: read more."""
    if len(handshake) < 4:
        return None
    if handshake[0] != _SERVER_HELLO:
        return 0
    if len(handshake) < 4 + 2 + 32:
        return None
    if handshake[6:38] != _RETRY_RANDOM:
        return 0
    return 4 + int.from_bytes(handshake[1:4], "big")


def hello_length(data: bytes) -> int | None:
    """How many bytes of records hold the whole ClientHello, once ``data`` says so
    (None: read more). :class:`NotTLS` when ``data`` is not a handshake."""
    handshake = b""
    offset = 0
    while offset + 5 <= len(data):
        kind, _, length = struct.unpack_from("!BHH", data, offset)
        length = int(length)
        if kind != _HANDSHAKE:
            raise NotTLS("not a TLS handshake record")
        if offset + 5 + length > len(data):
            return None
        handshake += data[offset + 5 : offset + 5 + length]
        offset += 5 + length
        if len(handshake) >= 4:
            if handshake[0] != _CLIENT_HELLO:
                raise NotTLS("the first handshake message is not a ClientHello")
            needed = 4 + int.from_bytes(handshake[1:4], "big")
            if needed > MAX_HELLO:
                raise NotTLS("the ClientHello is larger than the proxy reads")
            if len(handshake) >= needed:
                return int(offset)
    if offset > MAX_HELLO:
        raise NotTLS("no ClientHello within the bytes the proxy reads")
    return None


def server_name(records: bytes) -> str | None:
    """The host name of the ``server_name`` extension of the ClientHello in
    ``records`` (as :func:`hello_length` measured them), None when it has none.
    ``ValueError`` for a malformed hello, and for one a server could read another name
    from than the proxy: an extension twice, a list of more than one name;
    :class:`HiddenName` for an encrypted one."""
    handshake = b""
    offset = 0
    while offset + 5 <= len(records):
        _, _, length = struct.unpack_from("!BHH", records, offset)
        handshake += records[offset + 5 : offset + 5 + length]
        offset += 5 + length
    body = handshake[4 : 4 + int.from_bytes(handshake[1:4], "big")]
    try:
        at = 2 + 32  # version, random
        at += 1 + body[at]  # session id
        at += 2 + int.from_bytes(body[at : at + 2], "big")  # cipher suites
        at += 1 + body[at]  # compression methods
        if at >= len(body):
            return None  # no extensions
        end = at + 2 + int.from_bytes(body[at : at + 2], "big")
        at += 2
        if end > len(body):
            raise ValueError("the extensions run past the ClientHello")
        seen: set[int] = set()
        name: str | None = None
        while at + 4 <= end:
            kind, size = struct.unpack_from("!HH", body, at)
            at += 4
            if kind in seen:
                raise ValueError(f"the ClientHello has extension {kind} twice")
            seen.add(kind)
            if kind in _HIDDEN_NAMES:
                raise HiddenName(
                    f"the ClientHello hides the server name it asks for ({_HIDDEN_NAMES[kind]}), "
                    "which the proxy cannot check against the tunnel's: turn it off in the client"
                )
            if kind == _SERVER_NAME:
                name = _host_name(body[at : at + size])
            at += size
    except IndexError:
        raise ValueError("the ClientHello is cut short") from None
    return name


def _host_name(extension: bytes) -> str | None:
    at = 2  # the list's length
    found: str | None = None
    while at + 3 <= len(extension):
        kind, size = extension[at], int.from_bytes(extension[at + 1 : at + 3], "big")
        at += 3
        if kind == _HOST_NAME:
            if found is not None:
                # RFC 6066 allows one name of a type; a server taking another than the
                # first would be told a name the proxy never checked.
                raise ValueError("the server_name extension lists more than one host name")
            name = extension[at : at + size]
            if len(name) != size:
                raise ValueError("the server name is cut short")
            found = name.decode("ascii", "replace")
        at += size
    return found
