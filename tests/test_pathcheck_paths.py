"""Layer 1 (the seeds' Bash Path Enforcement) on its own: which paths a command names,
how they are canonicalized, and what is refused with which words."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lw_temporal._pathcheck import check_command, filter_listing
from lw_temporal._scope import Scope
from tests._pathcheck_support import worker_scope


@pytest.fixture
def scope(data_dir: Path) -> Scope:
    return worker_scope(data_dir)


OUTSIDE = [
    ("cat /etc/shadow", "/etc/shadow"),
    ("cat ../../../x", "/x"),
    ("cd .. && cd .. && cat x", "/mnt/x"),
    ("grep --file=/root/p x", "/root/p"),
    ("wc -l < /var/log/syslog", "/var/log/syslog"),
    ("cat /var/$x", "/var"),
    ("ls /home/*", "/home"),
    ("ls ~root", "/root"),  # root's home in the sandbox's passwd
    ("echo a > /srv/out", "/srv/out"),
    ("python3 /opt/tool.py", "/opt/tool.py"),
    ("cat /mnt/memory/secret", "/mnt/memory/secret"),
    ("mkdir /mnt/new", "/mnt/new"),
    ("cat /mnt/scratch/own/../../../runs", "/runs"),
    ("echo x | tee /mnt/scratch/sibling/f", "/mnt/scratch/sibling/f"),
    ("dd if=/dev/sda of=x", "/dev/sda"),
]
READ_ONLY = [
    ("echo a > /mnt/memory/workflow/x", "/mnt/memory/workflow/x"),
    ("cat <<EOF > /mnt/memory/org/x\nbody\nEOF", "/mnt/memory/org/x"),
    ("cp notes.md /mnt/scratch/from-planner/", "/mnt/scratch/from-planner"),
    ("mv /mnt/memory/org/a b", "/mnt/memory/org/a"),
    ("rm -rf /mnt/memory/pipeline/old", "/mnt/memory/pipeline/old"),
    ("sed -i s/a/b/ /mnt/memory/workflow/f.md", "/mnt/memory/workflow/f.md"),
    ("cd /mnt/memory/org; touch x", "/mnt/memory/org/x"),
    ("touch /usr/bin/evil", "/usr/bin/evil"),
    ("rmdir /mnt/scratch", "/mnt/scratch"),
    ("echo x >> /mnt/scratch/from-orchestrator/n", "/mnt/scratch/from-orchestrator/n"),
]
ALLOWED = [
    "true",
    "cat notes.md > out.md",
    "ls /mnt && find /mnt -name '*.md'",
    "cat /mnt/memory/workflow/lessons.md /mnt/scratch/from-planner/plan.md",
    "echo x > /tmp/t; cat /tmp/t 2>&1 >/dev/null",
    "grep -rn TODO /mnt/memory",
    "cd /tmp && touch a && cd - ",
    "python3 -c 'print(1)' | sort | uniq -c",
    "ls /usr/bin | head; cat /proc/self/status",
    "sed 's/a/b/' notes.md > notes2.md",
    'f=/etc/pass; cat "${f}wd"',  # built at run time: the sandbox's business
    "echo 'see /mnt/memory/org/policy.md' >> notes.md",
    "mkdir -p a/b && cd a/b && echo x > ../c",
]


@pytest.mark.parametrize(("command", "path"), OUTSIDE)
def test_outside_the_roots(scope: Scope, command: str, path: str) -> None:
    assert check_command(scope, command).rejection == (f"path is outside the allowed roots: {path}")


@pytest.mark.parametrize(("command", "path"), READ_ONLY)
def test_read_only(scope: Scope, command: str, path: str) -> None:
    assert check_command(scope, command).rejection == f"path is read-only: {path}"


@pytest.mark.parametrize("command", ALLOWED)
def test_allowed(scope: Scope, command: str) -> None:
    assert check_command(scope, command).rejection is None


@pytest.mark.parametrize(
    "command", ['echo "unterminated', "cat <(ls", "if true; then echo", "echo $((1+", "a\x00b"]
)
def test_unparseable_commands_are_refused(scope: Scope, command: str) -> None:
    rejection = check_command(scope, command).rejection
    assert rejection is not None and rejection.startswith("command could not be parsed")


def test_symlink_leading_out_of_its_mount_is_outside(scope: Scope) -> None:
    os.symlink("/etc", scope.own_scratch / "etc-link")
    os.symlink("../../../..", scope.own_scratch / "up")
    (scope.own_scratch / "real").mkdir()
    os.symlink("real", scope.own_scratch / "inside")
    assert check_command(scope, "cat etc-link/hosts").rejection == (
        "path is outside the allowed roots: /mnt/scratch/own/etc-link/hosts"
    )
    assert check_command(scope, "ls up/").rejection == (
        "path is outside the allowed roots: /mnt/scratch/own/up"
    )
    assert check_command(scope, "echo x > inside/f").rejection is None


def test_recursive_listings_are_marked_and_filtered(scope: Scope) -> None:
    assert check_command(scope, "find /mnt").lists_recursively
    assert check_command(scope, "ls -laR .").lists_recursively
    assert check_command(scope, "grep -rn x /mnt").lists_recursively
    assert not check_command(scope, "ls -la").lists_recursively
    os.symlink("/etc", scope.own_scratch / "etc-link")
    listing = (
        "/mnt/memory/workflow/a.md\n"
        "/mnt/scratch/own/etc-link/hosts\n"
        "/var/secret.md\n"
        "./notes.md\n"
        "/mnt/memory/org/b.md:12:match\n"
        "/root/x:1:match\n"
        "/mnt/memory:\n"
        "plain line\n"
    )
    assert filter_listing(scope, listing) == (
        "/mnt/memory/workflow/a.md\n"
        "./notes.md\n"
        "/mnt/memory/org/b.md:12:match\n"
        "/mnt/memory:\n"
        "plain line\n"
    )
