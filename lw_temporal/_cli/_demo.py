"""``lw-temporal demo``: the sample pipeline end to end on an embedded dev server
(the pipeline itself is :mod:`lw_temporal._cli._demo_run`; this module only declares the
command)."""

from __future__ import annotations

import argparse

from ._common import Commands, add_model_options, then_exit


def add_demo(sub: Commands) -> None:
    demo = sub.add_parser(
        "demo",
        help="run the sample pipeline end to end on an embedded Temporal dev server",
    )
    demo.add_argument(
        "--data-dir",
        default=None,
        help="where memory and run scratch go (default: ./lw-data, or /var/tmp/lw-demo "
        "where the sandbox user cannot reach ./lw-data; the demo says which)",
    )
    demo.add_argument(
        "--hold",
        action="store_true",
        help="keep the dev server and its UI up after the pipeline, until Ctrl-C",
    )
    add_model_options(demo)
    demo.set_defaults(handler=then_exit(_run_demo))


async def _run_demo(args: argparse.Namespace) -> int:
    from ._demo_run import run_demo

    return await run_demo(args)
