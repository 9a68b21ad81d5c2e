"""The ``lw-temporal`` command line: one module per command group, wired here into one
parser.

Each group declares its arguments and prints; the work lives in the module of its
concept (the plugin, memory stores, dreaming, retention, the live tree), so the
library and the command line share one implementation of each rule.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from ._common import Handler, build_model, load_object, parse_duration

__all__ = ["build_model", "build_parser", "load_object", "main", "parse_duration"]


def build_parser() -> argparse.ArgumentParser:
    from ._demo import add_demo
    from ._dream import add_dream
    from ._gc import add_gc
    from ._memory import add_memory
    from ._network import add_network
    from ._run import add_run
    from ._worker import add_worker

    parser = argparse.ArgumentParser(
        prog="lw-temporal",
        description="Durable, sandboxed working memory for AI agents on Temporal.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (add_demo, add_worker, add_dream, add_gc, add_memory, add_network, add_run):
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return asyncio.run(handler(args))
    except KeyboardInterrupt:
        print("lw-temporal: interrupted", file=sys.stderr)
        return 130
