"""The pre-check refuses only what it must: a word is a path when it could reach
something, read with bash's own quoting and tilde rules, and a line bash accepts is
never refused for its syntax; every refusal of a real outside path, or of a write to a
read-only one, stays."""

from __future__ import annotations

from pathlib import Path

import pytest

from lw_temporal import WorkflowDefinition
from lw_temporal._config import LwConfig
from lw_temporal._pathcheck import check_command
from lw_temporal._scope import Scope
from tests._pathcheck_support import worker_scope


@pytest.fixture
def scope(data_dir: Path) -> Scope:
    return worker_scope(data_dir)


NOT_PATHS = [
    "robocopy src dst /MIR /v",
    "csc /out:app.exe /target:exe Program.cs",
    "msbuild App.sln /t:Build /p:Configuration=Release",
    "aws logs tail /aws/lambda/ingest --since 1h",
    "curl http://localhost:8080/api/v1/items",
    "xmllint --xpath '//h:h1' page.xhtml",
    "openssl req -new -subj '/C=XX/O=Test/CN=localhost' -key k.pem",
    "git blame -L '/def main/',+10 cli.py",
    "smbclient //server/share -U user",
    "echo '~> 1.0' \"~/x\" \\~root",
    "gem install rails -v '~> 7.1'",
    "ls ~-",
    "cat ~nosuchuser",
    "find . -path /etc -prune -o -name '*.py' -print",
    "echo done # cat /etc/shadow",
    "ls ../..",
]
# Valid bash that tree-sitter-bash cannot read (bash -n decides).
BASH_ACCEPTS = [
    "exec 3<>file",
    'for d in */; do (cd "$d" || continue; echo x) done',
    "{ while true; do echo; break; done } | cat",
    '[ "$v" -eq|ne|gt integer ]',
]
STILL_REFUSED = [
    ("echo /etc/shadow", "path is outside the allowed roots: /etc/shadow"),
    ("cat ~root/.bashrc", "path is outside the allowed roots: /root/.bashrc"),
    ("grep -r key ~root", "path is outside the allowed roots: /root"),
    ("cat //etc//shadow", "path is outside the allowed roots: /etc/shadow"),
    ("cat /../etc/shadow", "path is outside the allowed roots: /etc/shadow"),
    ("cat /./../../etc/shadow", "path is outside the allowed roots: /etc/shadow"),
    ("exec 3<>/mnt/memory/org/x", "path is read-only: /mnt/memory/org/x"),
    ("exec 3<>/etc/shadow; cat <&3", "path is outside the allowed roots: /etc/shadow"),
    ("gcc -o /usr/local/bin/app main.c", "path is read-only: /usr/local/bin/app"),
    ("curl -o /mnt/memory/org/page.html http://x", "path is read-only: /mnt/memory/org/page.html"),
    ("sort --output=/mnt/memory/org/s data", "path is read-only: /mnt/memory/org/s"),
    ("git -C /home/user/repo status", "path is outside the allowed roots: /home/user/repo"),
    ("cat /nonexistent-top/../etc/shadow", None),  # the kernel stops at the first part
    ("cat ../../../x", "path is outside the allowed roots: /x"),  # climbs out: refused
]


@pytest.mark.parametrize("command", NOT_PATHS)
def test_words_that_reach_nothing_are_not_paths(scope: Scope, command: str) -> None:
    assert check_command(scope, command).rejection is None


@pytest.mark.parametrize("command", BASH_ACCEPTS)
def test_a_line_bash_accepts_is_not_refused_for_its_syntax(scope: Scope, command: str) -> None:
    assert check_command(scope, command).rejection is None


def test_a_line_bash_rejects_is_still_refused(scope: Scope) -> None:
    for command in ('echo "unterminated', "if true; then echo", "cat <(ls"):
        rejection = check_command(scope, command).rejection
        assert rejection is not None and rejection.startswith("command could not be parsed")


def test_without_the_arbiter_an_unreadable_line_is_deferred(scope: Scope) -> None:
    check = check_command(scope, "exec 3<>file", arbiter=False)
    assert check.deferred and check.rejection is None


def test_a_line_bash_accepts_still_has_its_paths_checked(scope: Scope) -> None:
    rejection = check_command(scope, "for d in */; do (cat /etc/shadow) done").rejection
    assert rejection == "path is outside the allowed roots: /etc/shadow"


@pytest.mark.parametrize(("command", "expected"), STILL_REFUSED)
def test_real_outside_paths_and_read_only_writes_are_refused(
    scope: Scope, command: str, expected: str | None
) -> None:
    assert check_command(scope, command).rejection == expected


def test_without_staged_memory_a_memory_write_says_why(data_dir: Path) -> None:
    config = LwConfig.create(data_dir, [WorkflowDefinition(id="cr")])
    planner = config.scope_of("run_cr@1", "lw.Planner")
    command = "echo x >> /mnt/memory/workflow/notes.md"
    assert check_command(planner, command).rejection is None
    rejection = check_command(planner, command, staged_memory=False).rejection
    assert rejection is not None
    assert rejection.startswith("path is read-only: /mnt/memory/workflow/notes.md; ")
    assert "lw.memory" in rejection
    read = check_command(planner, "cat /mnt/memory/workflow/notes.md", staged_memory=False)
    assert read.rejection is None
