"""Host patterns of a network policy, and the host names of requests, read one way.

Standard library only: the policy model validates its patterns with these functions
and the proxy (another process, see :mod:`._server`) matches requests with the same
ones, so what a definition says and what the proxy allows cannot drift apart.

A pattern is ``name[:port]``, ``*.domain[:port]`` or an IP literal
(``203.0.113.7[:port]``, ``[2001:db8::7][:port]``):

* names are compared as the DNS does, in ASCII: lower case, one trailing dot dropped,
  internationalised labels as their punycode (``bücher.example`` is
  ``xn--bcher-kva.example``); a label IDNA 2003 would map to another one (``ß``,
  ``ς``, joiners) is refused, since clients disagree on its ASCII form: write the
  ``xn--`` label you mean;
* ``*.example.com`` matches every name below ``example.com`` (at any depth), not
  ``example.com`` itself; a wildcard keeps at least two labels (no ``*.com``) and
  only a whole leading label may be ``*`` (the policy model also refuses one over any
  public suffix, ``*.co.uk``: :mod:`._suffixes`, which needs a package the proxy's
  process does not load);
* a name needs two labels or more and a last label that is not a number (a URL
  reads ``10.1`` or ``2130706433`` as an IPv4 address);
* IP literals are written canonically (IPv4 as four decimal octets, IPv6 in brackets)
  and must be addresses the proxy would ever connect to (no private, loopback...);
  a request for an IP literal is allowed only by such a pattern, never by a name;
* without a port a pattern allows the web's ports, 80 and 443.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import unicodedata
from dataclasses import dataclass

from ._addresses import refusal

#: Ports a pattern without one allows.
WEB_PORTS = (80, 443)
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_MAX_NAME = 253

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class PatternError(ValueError):
    """A pattern or host that cannot be read; the message says how to write it."""


@dataclass(frozen=True, slots=True)
class Host:
    """A normalised host: an ASCII name, or an IP literal (``ip`` set)."""

    name: str
    ip: IPAddress | None = None

    def __str__(self) -> str:
        if isinstance(self.ip, ipaddress.IPv6Address):
            return f"[{self.ip}]"
        return self.name


@dataclass(frozen=True, slots=True)
class HostRule:
    """One allowed pattern: ``host`` is the name, the wildcard's domain (without
    ``*.``) or the IP literal, normalised."""

    host: str
    wildcard: bool
    ip: bool
    ports: tuple[int, ...]
    #: The canonical text (what a definition's hash and the agent's prompt show).
    text: str

    def matches(self, host: Host, port: int) -> bool:
        if port not in self.ports:
            return False
        if self.ip or host.ip is not None:
            return self.ip and host.ip is not None and str(host.ip) == self.host
        if self.wildcard:
            return host.name.endswith("." + self.host)
        return host.name == self.host

    def describe(self) -> str:
        """The pattern as the agent's prompt lists it."""
        ports = "ports 80 and 443" if self.ports == WEB_PORTS else f"port {self.ports[0]}"
        if self.wildcard:
            return f"any name below {self.host} ({ports})"
        return f"{self.host_text} ({ports})"

    @property
    def host_text(self) -> str:
        if self.wildcard:
            return f"*.{self.host}"
        return f"[{self.host}]" if ":" in self.host else self.host


def _ascii_label(label: str, text: str) -> str:
    if label.isascii():
        lowered = label.lower()
        if lowered.startswith("xn--"):
            try:
                lowered.encode("ascii").decode("idna")
            except UnicodeError:
                raise PatternError(f"{text!r}: label {label!r} is not valid punycode") from None
        return lowered
    folded = unicodedata.normalize("NFC", label).lower()
    try:
        encoded = folded.encode("idna").decode("ascii")
        back = encoded.encode("ascii").decode("idna")
    except UnicodeError:
        raise PatternError(
            f"{text!r}: label {label!r} is not a valid internationalised name"
        ) from None
    if back != folded:
        raise PatternError(
            f"{text!r}: IDNA 2003 reads label {label!r} as {encoded!r}, other clients "
            "differently; write the punycode label (xn--...) you mean"
        )
    return encoded


def normalise_name(value: str, text: str | None = None) -> str:
    """A DNS name in the form the proxy compares: ASCII, lower case, no trailing dot;
    :class:`PatternError` for anything that is not a name of two labels or more."""
    shown = value if text is None else text
    name = value[:-1] if value.endswith(".") else value
    if not name:
        raise PatternError(f"{shown!r} names no host")
    labels = [_ascii_label(label, shown) for label in name.split(".")]
    for label in labels:
        if not _LABEL.fullmatch(label):
            raise PatternError(
                f"{shown!r}: {label!r} is not a DNS label (1-63 letters, digits or '-', "
                "not starting or ending with '-')"
            )
    if len(labels) < 2:
        raise PatternError(
            f"{shown!r}: a host needs a domain (e.g. pypi.org); single-label names depend on "
            "the resolver's search list"
        )
    if labels[-1].isdigit():
        raise PatternError(f"{shown!r}: a name whose last label is a number reads as an IP address")
    ascii_name = ".".join(labels)
    if len(ascii_name) > _MAX_NAME:
        raise PatternError(f"{shown!r}: a DNS name has at most {_MAX_NAME} characters")
    return ascii_name


def parse_ip(value: str) -> IPAddress | None:
    """The IP address a request's host means, however it is spelt (``127.1``,
    ``0x7f000001`` and ``2130706433`` are all 127.0.0.1 to a URL parser and to
    libc), or None for a name."""
    bracketed = value.startswith("[") and value.endswith("]")
    if bracketed or ":" in value:
        try:
            ip6 = ipaddress.IPv6Address(value[1:-1] if bracketed else value)
        except ValueError:
            raise PatternError(
                f"{value!r} is not an IPv6 address" if bracketed else f"{value!r} is not a host"
            ) from None
        if ip6.scope_id is not None:
            raise PatternError(
                f"{value!r}: an IPv6 zone (%...) names an interface of this host, not an "
                "address on the network; write the address alone"
            )
        return ip6
    last = value.rstrip(".").rsplit(".", 1)[-1].lower()
    if last.isdigit() or last.startswith("0x"):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(value.rstrip(".")))
        except OSError:
            raise PatternError(
                f"{value!r} is neither a name (its last label is a number) nor an IPv4 address"
            ) from None
    return None


def request_host(value: str) -> Host:
    """The host a request names (CONNECT authority, URL, Host header, SNI)."""
    if not value or len(value) > _MAX_NAME + 2 or not value.isascii():
        raise PatternError(
            "the request names no valid host (ASCII names only: clients send punycode)"
        )
    ip = parse_ip(value)
    if ip is not None:
        return Host(str(ip), ip)
    return Host(normalise_name(value))


def split_port(value: str) -> tuple[str, int | None]:
    """``host[:port]`` (IPv6 in brackets) as (host, port or None)."""
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            raise PatternError(f"{value!r}: an IPv6 literal needs its closing ']'")
        host, rest = value[: end + 1], value[end + 1 :]
        if rest and not rest.startswith(":"):
            raise PatternError(f"{value!r}: only ':port' may follow an IPv6 literal")
        port_text = rest[1:] if rest else None
    elif value.count(":") > 1:
        raise PatternError(f"{value!r}: write an IPv6 literal in brackets ([2001:db8::1]:443)")
    else:
        host, sep, port_text = value.partition(":")
        if not sep:
            port_text = None
    if port_text is None:
        return host, None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise PatternError(f"{value!r}: the port must be a number from 1 to 65535")
    return host, int(port_text)


def parse_rule(text: str) -> HostRule:
    """A pattern of ``NetworkPolicy.allow``; :class:`PatternError` says what is wrong."""
    if (
        not isinstance(text, str)
        or not text
        or text != text.strip()
        or any(c.isspace() for c in text)
    ):
        raise PatternError(f"{text!r}: a pattern is one host name without spaces")
    host, port = split_port(text)
    ports = WEB_PORTS if port is None else (port,)
    wildcard = host.startswith("*.")
    if "*" in (host[2:] if wildcard else host):
        raise PatternError(
            f"{text!r}: only a whole leading label may be '*' (*.example.com); to allow "
            "everything, a policy is not the tool"
        )
    if wildcard:
        if host.rstrip(".").count(".") < 2:
            raise PatternError(
                f"{text!r}: a wildcard keeps at least two labels (*.example.com), not a whole "
                "top-level domain"
            )
        domain = normalise_name(host[2:], text)
        canonical = f"*.{domain}"
        rule = HostRule(domain, True, False, ports, "")
    else:
        ip = parse_ip(host)
        if ip is not None:
            written = host[1:-1] if host.startswith("[") else host
            if written != str(ip) or (
                isinstance(ip, ipaddress.IPv6Address) and not host.startswith("[")
            ):
                raise PatternError(
                    f"{text!r}: write IPv4 addresses as four decimal octets and IPv6 ones "
                    f"in brackets, canonically ({ip if ip.version == 4 else f'[{ip}]'})"
                )
            why = refusal(ip)
            if why is not None:
                raise PatternError(f"{text!r}: the proxy never connects to {ip} ({why})")
            canonical = host if ip.version == 4 else f"[{ip}]"
            rule = HostRule(str(ip), False, True, ports, "")
        else:
            canonical = normalise_name(host, text)
            rule = HostRule(canonical, False, False, ports, "")
    full = canonical if port is None else f"{canonical}:{port}"
    return HostRule(rule.host, rule.wildcard, rule.ip, rule.ports, full)


def first_match(rules: tuple[HostRule, ...], host: Host, port: int) -> HostRule | None:
    return next((rule for rule in rules if rule.matches(host, port)), None)
