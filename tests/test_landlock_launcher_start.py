"""The Landlock launcher starts a Python interpreter for every command: it is imported
(from its bytecode cache, not compiled anew as a script run by path is) and pulls in
no module it does not need, such as ``json``, ``typing`` or ``re``, whose imports were
half its start."""

from __future__ import annotations

import subprocess
import sys

from lw_temporal._sandbox import _landlock

HEAVY = {"json", "typing", "re", "contextlib", "shutil", "base64"}  # (signal needs enum)


def test_the_launcher_imports_only_what_a_launch_needs() -> None:
    assert _landlock._START.endswith("_landlock_launch.main()")
    probe = _landlock._START.replace(
        "_landlock_launch.main()", "print(' '.join(sorted(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", probe], capture_output=True, text=True, check=True
    )
    loaded = set(done.stdout.split())
    assert "_landlock_launch" in loaded
    assert not loaded & HEAVY, sorted(loaded & HEAVY)
