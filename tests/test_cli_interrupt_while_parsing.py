"""A ctrl-C while ``lw-temporal`` builds its parser ends it with one line and exit
status 130. Building the parser imports each command's module (the key stores, the
codec, the review page's parts), a second or more after the library itself is in; an
interrupt there printed the traceback of whichever import it landed in.

The interrupt is a real SIGINT the process sends itself when the import system first
looks for a module only the parser's build imports, so the test does not depend on
timing.
"""

from __future__ import annotations

import signal
import subprocess
import sys

_LATE_MODULE = "lw_temporal._privacy._server"

_INTERRUPTED_PARSE = f"""
import os, sys
from _lw_temporal_entry import main

assert {_LATE_MODULE!r} not in sys.modules  # imported by the parser's build, not before

class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == {_LATE_MODULE!r}:
            os.kill(os.getpid(), {int(signal.SIGINT)})
        return None

sys.meta_path.insert(0, Interrupt())
sys.argv = ["lw-temporal", "status", "pipeline_none", "--address", "localhost:1"]
sys.exit(main())
"""


def test_ctrl_c_while_the_parser_is_built_is_one_line_and_130() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_PARSE],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr == "lw-temporal: interrupted\n"
    assert done.stdout == ""
