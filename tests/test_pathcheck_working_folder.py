"""The pre-check follows the working folder as bash changes it, and the listing filter
judges relative lines against the folder the listing ran in: a line is withheld only
when it names a path outside the roots, counted, and never on a guess."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

import pytest

from lw_temporal._pathcheck import LISTING_CUT, check_command, withhold_outside
from lw_temporal._scope import Scope
from tests._pathcheck_support import worker_scope

OWN = PurePosixPath("/mnt/scratch/own")


@pytest.fixture
def scope(data_dir: Path) -> Scope:
    return worker_scope(data_dir)


# (command, the folder its listings ran in, or None when it cannot be known)
LISTING_FOLDERS = [
    ("cd sub/pkg && grep -rn TODO .. && find .. -name '*.py'", OWN / "sub/pkg"),
    ("ls -R ..", OWN),
    ("cd /mnt/memory; cd -; find .", OWN),
    ("cd /mnt/memory && cd org && find .", PurePosixPath("/mnt/memory/org")),
    ("(cd /mnt/memory && true); find .", OWN),
    ("cd /mnt/memory | cat; find .", OWN),
    ("cd /mnt/memory & find .", OWN),
    ("pushd /mnt/memory && popd && ls -R", OWN),
    ("pushd /mnt/memory >/dev/null; find .", PurePosixPath("/mnt/memory")),
    ("cd ~ && cd .. && find own", PurePosixPath("/mnt/scratch")),
    ("(cd /mnt/memory && find .); find .", None),  # two folders
    ('cd "$D" && find .', None),
    ("for d in a b; do cd $d; done; find .", None),
    ("if true; then cd sub; fi; find .", None),
    ("true || cd sub; find .", None),
    ("cd sub; popd; find .", OWN / "sub"),  # popd with an empty stack fails, changes nothing
]


@pytest.mark.parametrize(("command", "folder"), LISTING_FOLDERS)
def test_the_folder_each_listing_ran_in(
    scope: Scope, command: str, folder: PurePosixPath | None
) -> None:
    check = check_command(scope, command)
    assert check.rejection is None and check.lists_recursively
    assert check.listing_cwd == folder


def test_paths_are_resolved_where_they_are_named(scope: Scope) -> None:
    assert check_command(scope, "cd /mnt/memory/org && touch x").rejection == (
        "path is read-only: /mnt/memory/org/x"
    )
    assert check_command(scope, "(cd /mnt/memory/org); touch x").rejection is None
    assert check_command(scope, "cat ~+/../../../etc/hostname").rejection == (
        "path is outside the allowed roots: /etc/hostname"
    )
    assert check_command(scope, "cd /mnt/memory/org; cd -; touch x").rejection is None
    assert check_command(scope, "git -C /mnt/memory/org log ../x").rejection == (
        "path is outside the allowed roots: /mnt/memory/x"
    )
    assert check_command(scope, 'cd "$X"; cat ../../../../etc/hostname').rejection is None


def test_relative_lines_are_judged_against_the_listings_folder(scope: Scope) -> None:
    listing = "../t.py:1:# TODO\n../t.py\n..:\n../pkg:\n../../../../etc/hosts\n"
    kept = withhold_outside(scope, listing, OWN / "sub/pkg", budget=5)
    assert kept.text == "../t.py:1:# TODO\n../t.py\n..:\n../pkg:\n"
    assert kept.withheld == 1
    assert kept.note() == (
        "1 line of the listing withheld: they name paths outside the allowed roots"
    )


def test_relative_lines_are_kept_when_the_folder_is_unknown(scope: Scope) -> None:
    listing = "../../../x\n/etc/shadow\n./a\n"
    kept = withhold_outside(scope, listing, None, budget=5)
    assert kept.text == "../../../x\n./a\n" and kept.withheld == 1


def test_a_symlink_into_the_system_view_is_inside(scope: Scope) -> None:
    os.symlink("/usr/share", scope.own_scratch / "share")
    assert check_command(scope, "ls share/").rejection is None
    kept = withhold_outside(scope, "./share/x\n", OWN, budget=5)
    assert kept.withheld == 0


def test_a_filter_out_of_time_withholds_the_rest_and_says_so(scope: Scope) -> None:
    kept = withhold_outside(scope, "./a\n/etc/x\n./b\n", OWN, budget=0)
    assert kept.cut and kept.text.endswith(LISTING_CUT)
    assert kept.withheld == 3
    assert kept.note() is not None and "ran out of time" in kept.note()  # type: ignore[operator]
