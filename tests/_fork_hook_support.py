"""The sample pipeline's definitions, imported the way ``--definitions`` imports them,
with a library-style at-fork hook that starts a thread in every ``os.fork`` child (as
OpenTelemetry's batch span processor does): whatever the sandbox forks must not run it."""

from __future__ import annotations

import os
import threading
import time

from workflows.pipeline import DEFINITIONS as _SAMPLE

DEFINITIONS = _SAMPLE


def _start_a_thread() -> None:
    threading.Thread(target=time.sleep, args=(5,), daemon=True).start()


os.register_at_fork(after_in_child=_start_a_thread)
