"""Bash itself as the judge of a command the grammar could not read.

tree-sitter-bash rejects some lines bash runs (``exec 3<>file``, ``( ... ) done``
without a ``;``). When the grammar reports an error, ``bash -n`` (read the commands,
run none of them) decides: a line bash accepts is never refused for its syntax. It
runs only for those lines (about one in a hundred real-world ones), with a cleared
environment, the script on its standard input, and the time left of the check's
budget.
"""

from __future__ import annotations

import subprocess

BASH = "/bin/bash"


def bash_accepts(script: bytes, timeout: float) -> bool | None:
    """Whether bash parses ``script``; None when it could not say in ``timeout``."""
    try:
        done = subprocess.run(
            [BASH, "-n"],
            input=script,
            capture_output=True,
            env={},
            timeout=max(timeout, 0.001),
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None
    except OSError:
        return False  # no bash to ask: keep the grammar's answer
    return done.returncode == 0
