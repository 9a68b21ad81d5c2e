"""What every command group of ``lw-temporal`` shares: connecting, loading a
``module:attribute``, reading durations and ``--model``, printing, and ending a command.

One place, so each group reports bad input and failures the same way: one clear line
on stderr naming the problem and a non-zero exit (:class:`CliError`), and every line it
prints goes through :func:`say`, which escapes what a terminal would act on (the text
is often written by agents: see :mod:`lw_temporal._terminal`).
"""

from __future__ import annotations

import argparse
import errno
import getpass
import os
import re
import sys
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import Any, TypeAlias

from pydantic import ValidationError
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError, FailureError
from temporalio.service import RPCError, RPCStatusCode

from .._terminal import terminal_safe

Handler = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]
#: The subcommands of a parser, which each command group adds itself to.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


#: Exit status of a command that cannot start as asked (bad input, as argparse's own).
USAGE = 2


class CliError(Exception):
    """A failure the command explains in one line; ``code`` is its exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def say(text: str = "", *, err: bool = False, end: str = "\n") -> None:
    """Print ``text`` (often agent-written) with terminal controls escaped."""
    print(terminal_safe(text), end=end, file=sys.stderr if err else sys.stdout, flush=True)


def load_object(spec: str) -> Any:
    """Import ``module:attribute`` (e.g. ``workflows.pipeline:DEFINITIONS``)."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise CliError(f"{spec!r} is not of the form module:attribute", USAGE)
    import importlib

    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise CliError(f"cannot import {module_name!r}: {err}", USAGE) from None
    except SyntaxError as err:
        where = f" ({err.filename}, line {err.lineno})" if err.filename else ""
        raise CliError(f"cannot import {module_name!r}: {err.msg}{where}", USAGE) from None
    except Exception as err:  # the module itself failed: a definition it builds, say
        raise CliError(
            f"importing {module_name!r} (for {spec}) failed: {explain(err)} "
            "(--debug shows the traceback)",
            USAGE,
        ) from err
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise CliError(f"{module_name!r} has no attribute {attribute!r}", USAGE) from None


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
        made = load_object(spec)
        # A factory (class or function) is called; a ready Model is used as is (the
        # plugin refuses what is not one, naming it).
        if not isinstance(made, type) and hasattr(made, "next_turn"):
            return made
        if not callable(made):
            raise CliError(
                f"--model {spec} is a {type(made).__name__}, not a Model (an object with "
                "async next_turn) or a factory returning one",
                USAGE,
            )
        try:
            model = made()
        except Exception as err:
            raise CliError(f"--model {spec}: calling it failed: {explain(err)}", USAGE) from err
        if not hasattr(model, "next_turn"):
            raise CliError(
                f"--model {spec} returned a {type(model).__name__}, not a Model (an object "
                "with async next_turn)",
                USAGE,
            )
        return model
    try:
        return model_from_spec(spec, base_url=base_url)
    except ModelSpecError as err:
        raise CliError(str(err), USAGE) from None
    except ImportError as err:
        provider = spec.partition(":")[0]
        raise CliError(
            f"model {spec!r} needs the {provider} SDK: "
            f"pip install 'lw-temporal[{provider}]' ({err})",
            USAGE,
        ) from None


def existing_dir(text: str) -> str:
    """An argparse type: a folder that exists (the data dir of a command that only reads
    or cleans one, and must not make an empty one)."""
    if not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is not an existing folder")
    return text


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
    """``--address`` and ``--namespace``, defaulting as the Temporal CLI does: to
    ``TEMPORAL_ADDRESS`` / ``TEMPORAL_NAMESPACE``, else ``localhost:7233`` / ``default``."""
    parser.add_argument(
        "--address",
        default=os.environ.get("TEMPORAL_ADDRESS") or "localhost:7233",
        help="Temporal frontend host:port (default: $TEMPORAL_ADDRESS or localhost:7233)",
    )
    parser.add_argument(
        "--namespace",
        default=os.environ.get("TEMPORAL_NAMESPACE") or "default",
        help="Temporal namespace (default: $TEMPORAL_NAMESPACE or default)",
    )


def unreachable(address: str, err: BaseException) -> str:
    """One line for a server that cannot be reached, with the reason the SDK buried."""
    text = str(err)
    found = re.findall(r'(?:message|error): "([^"]+)"', text) or re.findall(
        r'ConnectError\("([^"]+)"', text
    )
    reason = found[-1] if found else text.removeprefix("Failed client connect: ")
    return (
        f"cannot reach a Temporal server at {address} ({reason}); start one "
        "(temporal server start-dev) or pass --address HOST:PORT"
    )


def explain(err: BaseException, args: argparse.Namespace | None = None) -> str:
    """One line for a failure nobody caught on the way: what the server, the workflow
    or the library said, without the traceback."""
    address = getattr(args, "address", None)
    namespace = getattr(args, "namespace", None)
    if isinstance(err, RPCError):
        if err.status is RPCStatusCode.UNAVAILABLE and address:
            return unreachable(address, err)
        if err.status is RPCStatusCode.NOT_FOUND and namespace and "amespace" in err.message:
            return f"{err.message} (on {address}; pass --namespace NAME or create it)"
        return f"the server refused: {err.message or err.status.name}"
    if isinstance(err, WorkflowFailureError | FailureError):
        parts: list[str] = []
        cause: BaseException | None = err
        while cause is not None and len(parts) < 8:
            message = cause.message if isinstance(cause, FailureError) else str(cause)
            if message and message not in parts:
                parts.append(message)
            cause = cause.__cause__
        return " <- ".join(parts) or type(err).__name__
    if isinstance(err, ApplicationError | CliError | ImportError):
        return str(err)  # (an ImportError of lw's names the package to install)
    if isinstance(err, OSError) and err.filename:
        return f"{err.filename}: {err.strerror or err}"
    if isinstance(err, ValidationError):  # one line: where and why, not pydantic's report
        return "; ".join(
            f"{'.'.join(map(str, e['loc'])) or err.title}: {e['msg']}" for e in err.errors()[:3]
        )
    text = " ".join(str(err).split())  # one line, whatever the message holds
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def operator() -> str:
    """Who runs this command, for the audit lines of a command without ``--by``: the
    login name (``cli`` where the system has none for this user)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "cli"


def serve_refused(what: str, listen: str, err: Exception) -> int:
    """The exit status of a local server (``ui``, ``codec-server``) that could not start:
    a taken ``--listen`` port (EADDRINUSE) or a data dir that is not there is a usage
    mistake, one line naming the fix and status 2; anything else as :func:`failed`."""
    if isinstance(err, OSError) and err.errno == errno.EADDRINUSE:
        say(
            f"lw-temporal {what}: cannot listen on {listen}: the port is in use (another "
            f"lw-temporal {what}?); pass --listen HOST:PORT with a free port (port 0: any)",
            err=True,
        )
        return USAGE
    if isinstance(err, NoDataDir):
        say(f"lw-temporal {what}: {err}", err=True)
        return USAGE
    return failed(what, err)


class NoDataDir(ValueError):
    """``--data-dir`` names no folder."""

    def __init__(self, data_dir: object) -> None:
        super().__init__(
            f"--data-dir {data_dir} is not a folder: give the workers' data dir "
            "(the --data-dir of lw-temporal worker)"
        )


def failed(what: str, err: Exception) -> int:
    """Say on stderr that ``what`` failed and why (its cause too); the exit code. A
    reader that closed the pipe is no failure: handlers catch ``OSError`` around what
    they print, so it goes on to :func:`main`, which ends quietly with the SIGPIPE status."""
    if isinstance(err, BrokenPipeError):
        raise err
    message = str(err) or type(err).__name__
    if isinstance(err, CliError | RPCError | OSError):
        message = explain(err)  # (an OSError as its path and reason)
    cause = getattr(err, "cause", None) or err.__cause__
    if cause is not None and str(cause):
        message = f"{message}: {cause}"
    say(f"lw-temporal: {what} failed: {message}", err=True)
    return 1


#: Exit status of a command whose output pipe was closed by its reader (as SIGPIPE).
CLOSED_PIPE = 141


def exit_now(code: int, *, undo_sandbox: bool = True) -> None:
    """End the process with ``code`` right away (output flushed; a closed pipe is not
    an error): the SDK's native threads can crash CPython's teardown of a finished
    process (temporalio/sdk-python#300). What the sandbox set up for this process is
    undone first (``os._exit`` runs no ``atexit`` handler), unless ``undo_sandbox`` is
    false (a second signal: at once)."""
    exits = sys.modules.get("lw_temporal._sandbox._exits")  # loaded if a sandbox was
    if undo_sandbox and exits is not None:
        exits.run_exit_handlers()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
            os.close(devnull)
    os._exit(code)


def then_exit(handler: Handler) -> Handler:
    """Exit straight after a short-lived client command (see :func:`exit_now`)."""

    async def run(args: argparse.Namespace) -> int:
        code = await handler(args)
        exit_now(code)
        return code

    return run
