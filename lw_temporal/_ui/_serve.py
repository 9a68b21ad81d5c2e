"""Serving the review page: where it listens, which origins it answers, and the line
with the login URL it prints."""

from __future__ import annotations

import socket
from collections.abc import Sequence

import uvicorn
from temporalio.client import Client

from .._listen import is_loopback, split_listen
from ..memory._stores import MemoryStores
from ._app import Review, build_app
from ._guard import Guard, cookie_name


class ListenRefused(Exception):
    """A listen address the page will not serve on as asked."""


def origins_for(host: str, port: int, extra: Sequence[str]) -> frozenset[str]:
    """The origins whose forms (and Host headers) the page accepts."""
    shown = f"[{host}]" if ":" in host else host
    found = {f"http://{shown}:{port}", *(o.rstrip("/") for o in extra)}
    if is_loopback(host):
        found |= {f"http://localhost:{port}", f"http://127.0.0.1:{port}"}
    return frozenset(found)


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(64)
    sock.setblocking(False)
    return sock


async def serve(
    client: Client,
    stores: MemoryStores,
    *,
    listen: str,
    proxy_header: str | None = None,
    origins: Sequence[str] = (),
    allow_remote: bool = False,
    announce: bool = True,
) -> None:
    """Serve the page until cancelled; prints the URL to open (with the token)."""
    try:
        host, port = split_listen(listen)
    except ValueError as err:
        raise ListenRefused(str(err)) from None
    if not is_loopback(host) and proxy_header is None and not allow_remote:
        raise ListenRefused(
            f"--listen {listen}: the page listens on loopback only unless told: put it "
            "behind your authenticating proxy (--trust-proxy-header NAME) or say "
            "--allow-remote (plain HTTP: the token and cookie cross the network)"
        )
    sock = bind(host, port)
    port = sock.getsockname()[1]
    guard = Guard(
        origins=origins_for(host, port, origins),
        proxy_header=proxy_header,
        cookie=cookie_name(port),
    )
    app = build_app(Review(client=client, stores=stores, guard=guard))
    shown = f"[{host}]" if ":" in host else host
    if announce:
        if proxy_header is None:
            print(f"review page: {guard.login_url(f'http://{shown}:{port}')}", flush=True)
        else:
            print(
                f"review page: http://{shown}:{port}/ (users named by the {proxy_header} "
                "header of your proxy)",
                flush=True,
            )
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="off", server_header=False
    )
    await uvicorn.Server(config).serve(sockets=[sock])
