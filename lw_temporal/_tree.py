"""Every entry below a folder, for the passes that sweep what agents left on disk
(retention's sizes, ``forget``'s and ``memory redact``'s file lists).

The trees are agents' scratch: a command can leave folders 1,200 deep, links that point
anywhere, sockets and fifos. So the walk is iterative (no recursion limit), never follows
a link, and skips what vanishes or cannot be read while it runs rather than stopping.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator


def entries_below(root: str) -> Iterator[tuple[str, os.stat_result]]:
    """``(path, lstat)`` of every entry below ``root`` (not ``root`` itself)."""
    stack = [root]
    while stack:
        try:
            scan = os.scandir(stack.pop())
        except OSError:
            continue
        with scan:
            for entry in scan:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(info.st_mode):
                    stack.append(entry.path)
                yield entry.path, info
