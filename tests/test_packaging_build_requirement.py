"""The build requirement admits only setuptools versions that can build the project.

``license = "MIT"`` is a PEP 639 license expression, which setuptools reads from 77.0
on; before that a string there is a configuration error (setuptools 76.1 stops the
build with "`project.license` must be valid exactly by one definition"). With
``setuptools>=69`` a build without isolation on such a setuptools (``pip install
--no-build-isolation``, a distribution's packaging) failed before it started."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
#: The first setuptools that reads a license expression (a string ``project.license``).
LICENSE_EXPRESSIONS = Version("77.0")


def test_the_setuptools_floor_reads_the_license_field() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    requirements = [Requirement(r) for r in project["build-system"]["requires"]]
    (setuptools,) = [r for r in requirements if r.name == "setuptools"]
    floors = [Version(s.version) for s in setuptools.specifier if s.operator in (">=", "==")]
    assert floors, f"no lower bound on setuptools: {setuptools}"
    if isinstance(project["project"]["license"], str):
        assert max(floors) >= LICENSE_EXPRESSIONS, (
            f"{setuptools} admits setuptools that cannot read license = "
            f"{project['project']['license']!r}"
        )
