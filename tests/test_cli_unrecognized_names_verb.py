"""An argument no verb takes is refused by the verb's own usage: one line naming the
argument and the verb's ``--help`` (which lists its options), exit status 2. argparse
reports unrecognized arguments from the top-level parser, whose ``lw-temporal --help``
lists no verb's options."""

from __future__ import annotations

import pytest

from lw_temporal._cli import main


@pytest.mark.parametrize(
    ("argv", "verb"),
    [
        (["run", "--definition", "candidate-review", "task"], "lw-temporal run"),
        (["status", "pipeline_x", "--bogus"], "lw-temporal status"),
        (["dream", "list", "--bogus"], "lw-temporal dream list"),
        (["network", "log", "pipeline_x", "--data-dir", "."], "lw-temporal network log"),
        (
            [
                "memory",
                "restore",
                "org",
                "a.md",
                "0" * 64,
                "--data-dir",
                ".",
                "--by",
                "me",
                "--version",
                "3",
            ],
            "lw-temporal memory restore",
        ),
    ],
)
def test_an_unknown_argument_names_the_verbs_help(
    argv: list[str], verb: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"{verb}: unrecognized arguments: ")
    assert err.endswith(f"(see {verb} --help)\n")
