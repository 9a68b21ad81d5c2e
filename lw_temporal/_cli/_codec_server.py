"""``lw-temporal codec-server``: Temporal's codec endpoint over the deployment's keys,
so the Temporal UI and CLI show lw's payloads to whoever holds its token (the work is
:mod:`lw_temporal._privacy._server`)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import secrets
import signal
from pathlib import Path
from typing import Any

from .._listen import is_loopback, split_listen
from ._common import Commands, NoDataDir, say, serve_refused
from ._keys import add_key_store, key_store


def add_codec_server(sub: Commands) -> None:
    parser = sub.add_parser(
        "codec-server",
        help="serve Temporal's /encode and /decode over the workers' keys (UI and CLI)",
        description=(
            "Serve Temporal's remote codec protocol (POST /encode, /decode) with the "
            "workers' payload keys, so `temporal workflow show --codec-endpoint URL "
            "--codec-auth 'Bearer TOKEN'` and the Temporal UI show lw's payloads. Every "
            "request needs the token (printed at start, or read from --token-file); the UI "
            "gets it as a cookie from /login?token=TOKEN. Loopback only unless --listen "
            "says otherwise (plain HTTP: put TLS in front of a non-loopback address)."
        ),
    )
    parser.add_argument("--data-dir", required=True, help="the workers' data dir (memory root)")
    add_key_store(parser)
    parser.add_argument("--listen", default="127.0.0.1:8081", help="HOST:PORT (port 0: any)")
    parser.add_argument(
        "--ui-origin",
        action="append",
        default=None,
        metavar="URL",
        help="an origin of the Temporal UI allowed to call from a browser (repeatable; "
        "default: http://localhost:8233, http://127.0.0.1:8233, http://localhost:8080)",
    )
    parser.add_argument(
        "--token-file", default=None, help="a file holding the token (default: a new one)"
    )
    parser.set_defaults(handler=_serve)


def _server(args: argparse.Namespace, loop: asyncio.AbstractEventLoop) -> tuple[Any, str]:
    """The server the arguments describe, and where its keys are (for the banner)."""
    from .._ids import DataLayout
    from .._privacy import EncryptionCodec, KeyRing, key_folder
    from .._privacy._server import DEFAULT_ORIGINS, CodecHTTPServer

    host, port = split_listen(args.listen)
    data_dir = Path(args.data_dir)
    if not data_dir.is_dir():
        raise NoDataDir(data_dir)
    if args.token_file is not None:
        token = Path(args.token_file).read_text(encoding="utf-8").strip()
        if len(token) < 16:
            raise ValueError(f"--token-file {args.token_file}: use a token of 16+ characters")
    else:
        token = secrets.token_urlsafe(24)
    server = CodecHTTPServer(
        (host, port),
        codec=EncryptionCodec(KeyRing(key_store(args, data_dir))),
        token=token,
        origins=args.ui_origin or DEFAULT_ORIGINS,
        loop=loop,
    )
    return server, args.key_store or key_folder(DataLayout.at(data_dir))


async def _serve(args: argparse.Namespace) -> int:
    from .._privacy._server import describe

    loop = asyncio.get_running_loop()
    try:
        server, keys = _server(args, loop)
    except (OSError, ValueError) as err:
        return serve_refused("codec-server", args.listen, err)
    host = server.server_address[0]
    if not is_loopback(str(host)):
        say(
            f"lw-temporal codec-server: listening on {host}, not loopback, over plain HTTP: "
            "put TLS in front of it",
            err=True,
        )
    for line in describe(server, keys):
        say(line)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    serving = asyncio.create_task(asyncio.to_thread(server.serve_forever, 0.2))
    try:
        await stop.wait()
    finally:
        server.shutdown()
        await serving
        server.server_close()
    return 0
