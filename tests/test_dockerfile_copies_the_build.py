"""The worker image installs the project from what its Dockerfile copies, so every
file the build takes must be copied: the console script ``lw-temporal`` imports the
top-level module ``_lw_temporal_entry`` (outside the package, so a ctrl-C during the
library's import ends in one line), and an image built without it installs a
``lw-temporal`` that fails at once with ``ModuleNotFoundError`` (the image's ``CMD``
and the compose worker's ``command`` both run it).

There is no Docker engine where tests run, so the Dockerfile's ``COPY`` sources are
compared with the build configuration in pyproject.toml."""

from __future__ import annotations

import shlex
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _copied_sources() -> set[str]:
    """The build-context paths the Dockerfile's ``COPY`` instructions take."""
    sources: set[str] = set()
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.split()[:1] == ["COPY"]:
            words = shlex.split(line)
            args = [word for word in words[1:] if not word.startswith("--")]
            sources.update(arg.rstrip("/") for arg in args[:-1])
    return sources


def test_the_image_copies_every_module_and_package_the_build_installs() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    setuptools = config["tool"]["setuptools"]
    needed = {f"{module}.py" for module in setuptools["py-modules"]}
    needed |= {pattern.rstrip("*") for pattern in setuptools["packages"]["find"]["include"]}
    needed |= {"pyproject.toml", config["project"]["readme"]}
    for path in needed:
        assert (ROOT / path).exists(), path
    missing = needed - _copied_sources()
    assert not missing, f"the Dockerfile does not copy {sorted(missing)}"


def test_the_console_script_module_is_one_the_build_installs() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    module = config["project"]["scripts"]["lw-temporal"].split(":")[0]
    assert module in config["tool"]["setuptools"]["py-modules"]
