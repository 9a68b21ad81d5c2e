"""A ctrl-C while ``lw-temporal`` is still importing the library ends it with one line
and exit status 130, as a ctrl-C while a command runs does: no traceback.

The interrupt is a real SIGINT the process sends itself at a fixed point of the
import (when the import system first looks for the plugin module), so the test does
not depend on timing.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from importlib.metadata import entry_points

# Sent from inside the import of the library: the finder runs as the import system
# looks for lw_temporal._plugin (it finds nothing itself; the real module loads on).
_INTERRUPTED_IMPORT = f"""
import os, sys

class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "lw_temporal._plugin":
            os.kill(os.getpid(), {int(signal.SIGINT)})
        return None

sys.meta_path.insert(0, Interrupt())
sys.argv = ["lw-temporal", "--help"]
from _lw_temporal_entry import main
sys.exit(main())
"""


def test_the_console_script_starts_from_the_light_entry() -> None:
    [script] = entry_points(group="console_scripts", name="lw-temporal")
    assert script.value == "_lw_temporal_entry:main"


def test_ctrl_c_during_the_imports_is_one_line_and_130() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_IMPORT],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr == "lw-temporal: interrupted\n"
    assert done.stdout == ""


def test_without_an_interrupt_the_command_line_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_IMPORT.replace("lw_temporal._plugin", "-")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: lw-temporal")
