"""The ``lw-temporal`` command line: the demo, dreaming and scratch retention.

Each subcommand's work lives in the module of its concept; this module only parses
arguments and reports errors as one clear line and a non-zero exit.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

Handler = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lw-temporal",
        description="Durable, sandboxed working memory for AI agents on Temporal.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_demo(sub)
    return parser


def _add_demo(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = sub.add_parser(
        "demo",
        help="run the sample pipeline end to end on an embedded Temporal dev server",
    )
    demo.add_argument("--data-dir", required=True, help="where memory and run scratch go")

    async def handler(args: argparse.Namespace) -> int:
        from ._demo import run_demo

        return await run_demo(args)

    demo.set_defaults(handler=handler)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return asyncio.run(handler(args))
    except KeyboardInterrupt:
        print("lw-temporal: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
