"""What the sandbox undoes when the worker's process ends: the staging root on
``/dev/shm``, the command cgroups' parents, the spawner's pids cgroup, the mounts the
event loop's thread holds.

Each is an :mod:`atexit` handler, and also kept here: the command line ends its
processes with ``os._exit`` (the SDK's native threads can crash the interpreter's
teardown), which runs no :mod:`atexit` handler, so it runs these first
(:func:`run_exit_handlers`). Without that, a CLI worker left its staging root and
cgroups for the next worker's sweep, though the worker had stopped cleanly.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from collections.abc import Callable

_handlers: list[tuple[Callable[..., object], tuple[object, ...]]] = []
_lock = threading.Lock()


def at_exit(handler: Callable[..., object], *args: object) -> None:
    """Run ``handler(*args)`` when the process ends, by either way out."""
    with _lock:
        _handlers.append((handler, args))
    atexit.register(_run_one, handler, args)


def _run_one(handler: Callable[..., object], args: tuple[object, ...]) -> None:
    with _lock:
        try:
            _handlers.remove((handler, args))
        except ValueError:
            return  # already run by run_exit_handlers
    with contextlib.suppress(Exception):
        handler(*args)


def run_exit_handlers() -> None:
    """Run the handlers not run yet, the last registered first (as :mod:`atexit`
    does: the mounts the staging folders hold go before the folders)."""
    while True:
        with _lock:
            if not _handlers:
                return
            handler, args = _handlers.pop()
        with contextlib.suppress(Exception):
            handler(*args)
