"""The ``lw-temporal`` console script's entry: a ctrl-C while it starts ends it with one
line, like a ctrl-C at any later point.

The command line is part of the library, so importing it imports all of it (Temporal's
SDK, pydantic, the sandbox): a second or more, during which an interrupt would print
the traceback of whichever import it landed in. This module, outside the package,
imports nothing heavy itself; the command line handles ctrl-C once it runs.
"""

from __future__ import annotations

import os
import sys

#: Exit status of a command ended by ctrl-C (128 + SIGINT), as the command line's own.
INTERRUPTED = 130


def main() -> int:
    try:
        from lw_temporal._cli import main as run
    except KeyboardInterrupt:
        sys.stderr.write("lw-temporal: interrupted\n")
        sys.stderr.flush()
        # at once: a half-imported SDK may have started threads that a normal
        # interpreter teardown would wait for or trip over
        os._exit(INTERRUPTED)
    return run()


if __name__ == "__main__":
    sys.exit(main())
