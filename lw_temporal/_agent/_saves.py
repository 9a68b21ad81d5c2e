"""What lw saves in an agent's own scratch for it to re-read: results cleared from its
context or cut to fit it (``context-cleared/``), and the turns a compaction replaced
(``context-compacted/``).

Each is written once, never through a link the agent planted (an existing name is
kept: a retried activity saves the same bytes under the same name). Names carry the
turn, so a reset (or a workflow-level retry) to before a turn, which asks the model
again from there, would find the abandoned branch's saves under the names its own
take: :func:`drop_saved` removes them first, as the conversation drops that branch's
turns.
"""

from __future__ import annotations

import os
import re
import stat
from contextlib import suppress

from .._edit._files import save_once
from .._scope import Scope
from ._compaction import COMPACTED_FOLDER, transcript
from ._protocol import Exchange, ToolResult

#: Folder of the agent's own scratch holding the results cleared from its context.
CLEARED_FOLDER = "context-cleared"
_SAFE_ID = re.compile(r"[^A-Za-z0-9_-]")
#: Saved names and the 1-based turn each one's content reaches up to.
_CLEARED_NAME = re.compile(r"turn-(\d+)-[A-Za-z0-9_-]+\.txt")
_COMPACTED_NAME = re.compile(r"turns-\d+-(\d+)\.md")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def save_cleared(scope: Scope, result: ToolResult) -> str | None:
    """Put a cleared result where the agent can re-read it: its own scratch (``None``
    when it could not be saved)."""
    name = f"turn-{result.turn + 1}-{_SAFE_ID.sub('_', result.call_id)[:64]}.txt"
    data = result.text.encode("utf-8", "surrogateescape")
    if not save_once(scope.own_scratch, (CLEARED_FOLDER, name), data):
        return None
    return f"/mnt/scratch/own/{CLEARED_FOLDER}/{name}"


def save_transcript(scope: Scope, exchanges: list[Exchange]) -> None:
    """The compacted turns in full, where the summary says they are."""
    if not exchanges:
        return
    name = f"turns-{exchanges[0].turn + 1}-{exchanges[-1].turn + 1}.md"
    data = transcript(exchanges).encode("utf-8", "surrogateescape")
    save_once(scope.own_scratch, (COMPACTED_FOLDER, name), data)


def drop_saved(scope: Scope, turn: int) -> None:
    """Remove what lw saved for the branch a reset to before model turn ``turn``
    (0-based) abandoned: every save holding the results of turn ``turn - 1`` or later
    (asked again, they may differ: a reset can fall between that turn's tool calls),
    which only that branch's requests made. Only lw's own files (regular, the
    worker's) go; what the agent made there stays, and no link is followed."""
    for folder, pattern in ((CLEARED_FOLDER, _CLEARED_NAME), (COMPACTED_FOLDER, _COMPACTED_NAME)):
        try:
            root = os.open(scope.own_scratch, _DIR_FLAGS)
        except OSError:
            return  # no scratch: nothing was saved
        try:
            fd = os.open(folder, _DIR_FLAGS, dir_fd=root)
        except OSError:
            continue  # absent, or not a folder of lw's
        finally:
            os.close(root)
        try:
            for name in os.listdir(fd):
                match = pattern.fullmatch(name)
                if match is None or int(match.group(1)) < turn:
                    continue
                with suppress(OSError):
                    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid():
                        os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)
