"""Who the kernel's OOM killer takes first: a command, never the worker.

Commands are raised to the highest score as they start; the worker lowers its own
where it may. The memory bound of all commands together (:mod:`._cgroups`) decides
when the killer acts; these scores decide whom it picks.
"""

from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path


def first_to_go(pid: int) -> None:
    """Make ``pid`` (a launcher that has forked nothing yet, so its whole command) the
    OOM killer's first choice (raising a score needs no privilege)."""
    with contextlib.suppress(OSError):
        fd = os.open(f"/proc/{pid}/oom_score_adj", os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.write(fd, b"1000")
        finally:
            os.close(fd)


#: The worker's own OOM score: far below any other process's, not immune (a worker
#: that itself runs away may still be stopped).
WORKER_OOM_SCORE = -900


@functools.cache
def protect_worker() -> bool:
    """Lower the worker's own OOM score where it may (``CAP_SYS_RESOURCE``: a root
    worker), once; whether it is now protected. On cgroup v1 the thread that starts a
    command joins the command's cgroups for its fork, and with it the worker's memory
    (the kernel counts a process by its first thread there): should all commands
    together reach their bound in that moment, the worker must not be the choice."""
    path = Path("/proc/self/oom_score_adj")
    try:
        if int(path.read_text()) > WORKER_OOM_SCORE:
            path.write_text(str(WORKER_OOM_SCORE))
        return True
    except (OSError, ValueError):
        return False
