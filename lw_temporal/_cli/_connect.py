"""The client every command that talks to Temporal uses: the pydantic converter every
lw workflow's inputs and results need, sealing and opening payloads with the workers'
keys (:mod:`._keys`)."""

from __future__ import annotations

import argparse
from typing import Any

from temporalio.client import Client

from ._common import CliError, unreachable


async def connect(args: argparse.Namespace, **options: Any) -> Client:
    """A client of ``--address``/``--namespace`` with the pydantic converter, which
    every lw workflow's inputs and results need, sealing and opening payloads with the
    workers' keys (see :mod:`._keys`; ``options`` go to ``Client.connect``: plugins,
    runtime); a server out of reach is a :class:`CliError`."""
    if "plugins" not in options:
        from ._keys import client_converter

        options["data_converter"] = client_converter(args)
    try:
        return await Client.connect(args.address, namespace=args.namespace, **options)
    except RuntimeError as err:
        raise CliError(unreachable(args.address, err)) from None
