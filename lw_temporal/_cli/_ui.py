"""``lw-temporal ui``: the review page for approvals, dreams, memory and run trees."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._common import Commands, NoDataDir, add_connection, failed, serve_refused, then_exit
from ._connect import connect
from ._keys import add_keys

_HELP = """\
Serve the review page: pending approvals (approve, deny), dreams (their diff, the runs
each note came from, per-file approval), memory stores (files, versions, diffs, audit)
and run trees with their manifests. It listens on loopback and prints a URL with a
token; opening it signs the browser in (a cookie) and drops the token from the address.
Behind your own authenticating reverse proxy, --trust-proxy-header names the header
carrying the user instead (the proxy must set it and drop any copy a client sends).
Needs the ui extra: pip install 'lw-temporal[ui]'.
"""


def add_ui(sub: Commands) -> None:
    ui = sub.add_parser(
        "ui",
        help="serve the review page (approvals, dreams, memory, runs)",
        description=_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ui.add_argument("--data-dir", required=True, help="the workers' data dir (memory root)")
    ui.add_argument(
        "--listen", default="127.0.0.1:8765", help="HOST:PORT to serve on (port 0: any free)"
    )
    ui.add_argument(
        "--trust-proxy-header",
        default=None,
        metavar="NAME",
        help="take the user from this header of your authenticating proxy (no token)",
    )
    ui.add_argument(
        "--origin",
        action="append",
        default=[],
        metavar="URL",
        help="a public origin the page is reached at (behind a proxy), e.g. "
        "https://review.example.com; forms from it are accepted",
    )
    ui.add_argument(
        "--allow-remote",
        action="store_true",
        help="listen on a non-loopback address without a proxy (plain HTTP)",
    )
    add_connection(ui)
    add_keys(ui)
    ui.set_defaults(handler=then_exit(_ui))


async def _ui(args: argparse.Namespace) -> int:
    try:
        from .._ui._serve import ListenRefused, serve
    except ImportError as err:
        return failed("ui", RuntimeError(f"pip install 'lw-temporal[ui]' ({err})"))
    from .._config import LwConfig
    from ..memory._stores import MemoryStores

    data_dir = Path(args.data_dir)
    if not data_dir.is_dir():  # noqa: ASYNC240 (once, before serving)
        return serve_refused("ui", args.listen, NoDataDir(data_dir))
    try:
        client = await connect(args)
        stores = MemoryStores.for_config(LwConfig.create(data_dir, []))
        await serve(
            client,
            stores,
            listen=args.listen,
            proxy_header=args.trust_proxy_header,
            origins=args.origin,
            allow_remote=args.allow_remote,
        )
    except ListenRefused as err:
        return failed("ui", err)
    except OSError as err:
        return serve_refused("ui", args.listen, err)
    return 0
