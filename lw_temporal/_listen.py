"""Where a local server of lw listens (the codec server, the review page): ``HOST:PORT``
read one way, and what counts as loopback, which both serve by default."""

from __future__ import annotations

import ipaddress


def split_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; port 0 picks a free one); ValueError
    naming the flag otherwise."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--listen {text!r} is not HOST:PORT (e.g. 127.0.0.1:8765)")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
