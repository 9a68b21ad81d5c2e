"""What every command group of ``lw-temporal`` shares: connecting, loading a
``module:attribute``, reading durations and ``--model``, and ending a command.

One place, so each group reports bad input and failures the same way: one clear line
on stderr naming the problem and a non-zero exit.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import Any, TypeAlias

from temporalio.client import Client

Handler = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]
#: The subcommands of a parser, which each command group adds itself to.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def load_object(spec: str) -> Any:
    """Import ``module:attribute`` (e.g. ``workflows.pipeline:DEFINITIONS``)."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise SystemExit(f"lw-temporal: {spec!r} is not of the form module:attribute")
    import importlib

    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise SystemExit(f"lw-temporal: cannot import {module_name!r}: {err}") from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise SystemExit(f"lw-temporal: {module_name!r} has no attribute {attribute!r}") from None


def add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        default=None,
        help=(
            "the model the agents use: anthropic:<model> (key from ANTHROPIC_API_KEY), "
            "openai:<model> (key from OPENAI_API_KEY), or module:attribute naming a Model "
            "or a factory returning one"
        ),
    )
    parser.add_argument(
        "--model-base-url",
        default=None,
        help="with openai:<model>: an OpenAI-compatible server (vLLM, Ollama, LiteLLM)",
    )


def build_model(spec: str, base_url: str | None = None) -> Any:
    """The Model of a ``--model`` value; exits with the variable to set when a
    provider's key is missing."""
    from ..models import ModelSpecError, model_from_spec
    from ..models._spec import is_provider_spec

    if not is_provider_spec(spec):
        model = load_object(spec)
        # A factory (class or function) is called; a ready Model is used as is.
        return model() if not hasattr(model, "next_turn") else model
    try:
        return model_from_spec(spec, base_url=base_url)
    except ModelSpecError as err:
        raise SystemExit(f"lw-temporal: {err}") from None
    except ImportError as err:
        provider = spec.partition(":")[0]
        raise SystemExit(
            f"lw-temporal: model {spec!r} needs the {provider} SDK: "
            f"pip install 'lw-temporal[{provider}]' ({err})"
        ) from None


_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> timedelta:
    """``90s``, ``15m``, ``1h30m``, ``7d``, ``2w`` (or plain seconds) as a timedelta."""
    import re

    value = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", value):
        seconds = float(value)
    else:
        parts = re.findall(r"(\d+(?:\.\d+)?)([smhdw])", value)
        if not parts or "".join(n + u for n, u in parts) != value:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a duration; write e.g. 90s, 15m, 1h30m, 7d or 2w"
            )
        seconds = sum(float(n) * _DURATION_UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"duration {text!r} must be positive")
    return timedelta(seconds=seconds)


def add_connection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--address", default="localhost:7233", help="Temporal frontend host:port")
    parser.add_argument("--namespace", default="default")


async def connect(args: argparse.Namespace) -> Client:
    """A client of ``--address``/``--namespace`` with the pydantic converter, which
    every lw workflow's inputs and results need, sealing and opening payloads with the
    workers' keys (see :mod:`._keys`)."""
    from ._keys import client_converter

    return await Client.connect(
        args.address, namespace=args.namespace, data_converter=client_converter(args)
    )


def operator() -> str:
    """Who runs this command, for the audit lines of a command without ``--by``: the
    login name (``cli`` where the system has none for this user)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "cli"


def failed(what: str, err: Exception) -> int:
    """Say on stderr that ``what`` failed and why (its cause too); the exit code."""
    message = str(err) or type(err).__name__
    cause = getattr(err, "cause", None) or err.__cause__
    if cause is not None and str(cause):
        message = f"{message}: {cause}"
    print(f"lw-temporal: {what} failed: {message}", file=sys.stderr)
    return 1


def then_exit(handler: Handler) -> Handler:
    """Exit straight after a short-lived client command: the SDK's native threads can
    crash CPython's teardown of a finished process (temporalio/sdk-python#300)."""

    async def run(args: argparse.Namespace) -> int:
        code = await handler(args)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    return run
