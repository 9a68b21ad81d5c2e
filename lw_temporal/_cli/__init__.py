"""The ``lw-temporal`` command line: one module per command group, wired here into one
parser.

Each group declares its arguments and prints; the work lives in the module of its
concept (the plugin, memory stores, dreaming, retention, the live tree), so the
library and the command line share one implementation of each rule.

Whatever fails, a command ends with one line on stderr naming the problem (the
traceback only with ``--debug``), a usage mistake with exit status 2, and a reader
that closes the pipe early (``lw-temporal status ... | head``) ends it quietly.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import Sequence
from typing import NoReturn

from ._common import (
    CLOSED_PIPE,
    USAGE,
    CliError,
    Commands,
    Handler,
    build_model,
    exit_now,
    explain,
    load_object,
    parse_duration,
    say,
)

__all__ = ["build_model", "build_parser", "load_object", "main", "parse_duration"]


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line usage error: the problem and where the usage is."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _add_debug(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument(
        "--debug", action="store_true", default=default, help="show the traceback of a failure"
    )
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                # SUPPRESS: a verb's own --debug only sets it when given there.
                _add_debug(child, argparse.SUPPRESS)


def build_parser() -> argparse.ArgumentParser:
    from ._approvals import add_approvals
    from ._codec_server import add_codec_server
    from ._demo import add_demo
    from ._dream import add_dream
    from ._forget import add_forget
    from ._gc import add_gc
    from ._memory import add_memory
    from ._network import add_network
    from ._run import add_run
    from ._ui import add_ui
    from ._worker import add_worker

    parser = _Parser(
        prog="lw-temporal",
        description="Durable, sandboxed working memory for AI agents on Temporal.",
    )
    sub: Commands = parser.add_subparsers(dest="command", required=True)  # type: ignore[assignment]
    adders = (add_demo, add_worker, add_dream, add_gc, add_memory, add_network, add_run)
    for add in (*adders, add_codec_server, add_forget, add_approvals, add_ui):
        add(sub)
    _add_debug(parser, False)
    return parser


def _command_name(args: argparse.Namespace) -> str:
    verb = getattr(args, "dream_command", None) or getattr(args, "memory_command", None)
    return " ".join(part for part in ("lw-temporal", args.command, verb) if part)


def _verb_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> _Parser:
    """The parser of the verb ``args`` were parsed for (``dream show``, ``run``), whose
    usage names the options an unrecognized argument was meant for."""
    found = parser
    while True:
        actions = [a for a in found._actions if isinstance(a, argparse._SubParsersAction)]
        chosen = getattr(args, actions[0].dest, None) if actions and actions[0].dest else None
        if not actions or chosen not in actions[0].choices:
            break
        found = actions[0].choices[chosen]
    return found if isinstance(found, _Parser) else _Parser(prog=found.prog)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """``argv`` parsed; a ctrl-C meanwhile (building the parser imports each command's
    module, a second or more) ends it with one line and 130, as during a command."""
    try:
        parser = build_parser()
        args, extras = parser.parse_known_args(argv)
    except KeyboardInterrupt:
        say("lw-temporal: interrupted", err=True)
        exit_now(130)
        raise SystemExit(130) from None
    if extras:  # argparse would name the top-level usage, which lists no verb's options
        _verb_parser(parser, args).error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    handler: Handler = args.handler
    try:
        return asyncio.run(handler(args))
    except KeyboardInterrupt:
        say("lw-temporal: interrupted", err=True)
        exit_now(130)
    except BrokenPipeError:
        exit_now(CLOSED_PIPE)
    except Exception as err:
        if args.debug:
            raise
        code = err.code if isinstance(err, CliError) else 1
        hint = "" if isinstance(err, CliError) else " (--debug shows the traceback)"
        with contextlib.suppress(BrokenPipeError):
            say(f"{_command_name(args)}: {explain(err, args)}{hint}", err=True)
        exit_now(code)
    return 1
