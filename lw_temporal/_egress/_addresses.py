"""Addresses the egress proxy never connects to, whatever a name resolves to.

Checked after resolution, on the very address the proxy then connects to (it never
resolves twice), so a name that answers a public address to one lookup and a
private one to the next (DNS rebinding) cannot reach the inside. Standard library
only (the proxy's process imports it).

Refused: the unspecified addresses (``connect`` to ``0.0.0.0`` reaches the host's
own loopback on Linux), loopback, private (RFC 1918, ULA ``fc00::/7``), link-local,
shared address space (CGNAT ``100.64.0.0/10``), multicast, reserved and every other
range IANA lists as not globally reachable, and the cloud providers' metadata and
platform addresses (``169.254.169.254``, ``fd00:ec2::254``, Azure's public
``168.63.129.16``...). An IPv6 address that carries an IPv4 one (mapped, 6to4,
Teredo, NAT64) is judged by the IPv4 address it reaches too.

Refused as well (:func:`refusal_here`): every address of this host's own interfaces,
public ones too, since a name that resolves to one reaches the services the host
binds on ``0.0.0.0``. They are read from the kernel (a netlink address dump) at most
every few seconds. Where the kernel refuses the dump (a container whose seccomp profile
or runtime has no ``NETLINK_ROUTE``), each address is asked about on its own instead:
one this host can bind a socket to is its own, and one it cannot tell about is refused.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import struct
import sys
import time

_Address = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Cloud metadata and platform endpoints (AWS, GCP, Azure, Oracle, Alibaba, ECS).
METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",
        "169.254.169.253",
        "169.254.170.2",
        "169.254.169.123",
        "168.63.129.16",
        "192.0.0.192",
        "100.100.100.200",
        "fd00:ec2::254",
        "fd00:ec2::23",
        "fd00:ec2::123",
    )
)
_SHARED = ipaddress.ip_network("100.64.0.0/10")
#: RFC 1918 and unique local addresses (the rest of what is not global is named so).
_PRIVATE = tuple(
    ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
)
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


def _embedded(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one leads to, if it carries one."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if any(ip in net for net in _NAT64):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def refusal(ip: _Address) -> str | None:
    """Why the proxy never connects to ``ip``, or None when it may."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded(ip)
        if inner is not None:
            why = refusal(inner)
            if why is not None:
                return f"{why}, carried in an IPv6 address"
    if ip in METADATA:
        return "a cloud metadata address"
    if ip.is_unspecified:
        return "the unspecified address, which reaches this host"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _SHARED:
        return "shared address space (CGNAT)"
    if any(ip in net for net in _PRIVATE if net.version == ip.version):
        return "private"
    if ip.is_private or ip.is_reserved or not ip.is_global:
        return "not globally reachable (a special-purpose range)"
    return None


def loopback_only(ip: _Address) -> bool:
    """Whether ``ip`` is refused for being loopback alone (what the test resolver
    override may allow, for the name it maps there)."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


#: The most seconds :func:`own_addresses` keeps what it read.
OWN_REFRESH = 5.0
OWN = "one of this worker host's own addresses"
_RTM_NEWADDR, _RTM_GETADDR, _NLMSG_ERROR, _NLMSG_DONE = 20, 22, 2, 3
_NLM_F_REQUEST_DUMP = 0x1 | 0x300
_IFA_ADDRESS, _IFA_LOCAL = 1, 2
_SIZES: dict[int, int] = {int(socket.AF_INET): 4, int(socket.AF_INET6): 16}
#: When the addresses were read, what was read, and why the last read failed (if it did).
_own: tuple[float, frozenset[_Address], str | None] = (float("-inf"), frozenset(), None)


def own_addresses() -> tuple[frozenset[_Address], str | None]:
    """The addresses of this host's interfaces (all of them, IPv4 and IPv6), read
    again once :data:`OWN_REFRESH` seconds passed, and why the last read failed:
    then the set is the last one read (empty if none was), and incomplete."""
    global _own
    now = time.monotonic()
    if now - _own[0] >= OWN_REFRESH:
        try:
            _own = (now, _dump(), None)
        except OSError as err:
            if _own[2] is None:  # once per failing spell: the proxy's stderr is the log
                print(
                    f"lw-egress: this host's addresses cannot be read ({err}); each address "
                    "is checked by binding to it until they can",
                    file=sys.stderr,
                )
            _own = (now, _own[1], str(err) or type(err).__name__)
    return _own[1], _own[2]


def _bound_here(ip: _Address) -> str | None:
    """Whether ``ip`` is this host's own, asked without the address list: a socket
    binds to an address of the host's interfaces only. :data:`OWN` if it binds, a
    refusal if the answer is not a clear no (failing closed), else ``None``."""
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.bind((str(ip), 0))
    except OSError as err:
        if err.errno == errno.EADDRNOTAVAIL:
            return None
        return f"possibly one of this worker host's own addresses (it cannot tell: {err})"
    return OWN


def _dump() -> frozenset[_Address]:
    """An ``RTM_GETADDR`` dump over ``NETLINK_ROUTE``: each address's ``IFA_LOCAL``
    (this end of a point-to-point link), else its ``IFA_ADDRESS``."""
    found: set[_Address] = set()
    family = getattr(socket, "AF_NETLINK", 16)
    with socket.socket(family, socket.SOCK_RAW | socket.SOCK_CLOEXEC, 0) as sock:
        sock.settimeout(2)
        sock.bind((0, 0))
        sock.send(struct.pack("=IHHII4xI", 24, _RTM_GETADDR, _NLM_F_REQUEST_DUMP, 1, 0, 0))
        while True:
            data = sock.recv(1 << 16)
            at = 0
            while at + 16 <= len(data):
                length, kind = struct.unpack_from("=IH", data, at)
                if kind == _NLMSG_DONE:
                    return frozenset(found)
                if kind == _NLMSG_ERROR or length < 16:
                    raise OSError("the kernel refused the address dump")
                if kind == _RTM_NEWADDR and at + 24 <= len(data):
                    address = _address(data[at : at + length])
                    if address is not None:
                        found.add(address)
                at += (length + 3) & ~3
            if not data:
                raise OSError("the address dump ended early")


def _address(message: bytes) -> _Address | None:
    size = _SIZES.get(message[16])
    attributes: dict[int, bytes] = {}
    at = 24
    while at + 4 <= len(message):
        length, kind = struct.unpack_from("=HH", message, at)
        if length < 4:
            break
        attributes[kind] = message[at + 4 : at + length]
        at += (length + 3) & ~3
    raw = attributes.get(_IFA_LOCAL) or attributes.get(_IFA_ADDRESS)
    if size is None or raw is None or len(raw) != size:
        return None
    return ipaddress.ip_address(raw)


def refusal_here(ip: _Address) -> str | None:
    """:func:`refusal`, or first :data:`OWN` for an address of this host's own
    interfaces (carried in an IPv6 one too) that is not loopback, or a refusal for one
    it cannot tell about while the addresses cannot be read."""
    if not loopback_only(ip):
        own, failed = own_addresses()
        inner = _embedded(ip) if isinstance(ip, ipaddress.IPv6Address) else None
        if ip in own or (inner is not None and inner in own):
            return OWN
        if failed is not None:
            for candidate in (ip, inner):
                why = None if candidate is None else _bound_here(candidate)
                if why is not None:
                    return why
    return refusal(ip)
