"""The README's ID grammar gives the dream token's own pattern: a Temporal Schedule
appends ``-<RFC 3339 time>`` to the IDs it starts, so a dream's token takes ':' and
'+' and up to 96 characters, where the other roles' tokens take neither and at most 64.
A reader who checks an ID against the README's patterns gets the worker's answer."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lw_temporal.ids import TOKEN_PATTERN as PLAIN_TOKEN
from lw_temporal.ids import InvalidWorkflowId, parse_workflow_id

ROOT = Path(__file__).resolve().parent.parent


def _grammar_section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## Workflow IDs are the run layout")
    return text[start : text.index("\n## ", start + 1)]


def _documented_patterns() -> list[str]:
    return re.findall(r"`(\[A-Za-z0-9\]\[[^`]*)`", _grammar_section())


def test_the_readme_gives_both_token_patterns() -> None:
    from lw_temporal._ids import DREAM_TOKEN_PATTERN

    assert _documented_patterns() == [PLAIN_TOKEN, DREAM_TOKEN_PATTERN]


@pytest.mark.parametrize(
    "workflow_id",
    ["dream_review@nightly-2026-12-02T03:00:00Z", "dream_review@" + "b" * 96],
)
def test_a_dream_id_the_readme_accepts_parses(workflow_id: str) -> None:
    dream = _documented_patterns()[1]
    assert re.fullmatch(dream, workflow_id.split("@", 1)[1])
    assert parse_workflow_id(workflow_id).run == workflow_id.split("@", 1)[1]


@pytest.mark.parametrize(
    "workflow_id",
    [
        "dream_review@" + "b" * 97,
        "run_review@nightly-2026-12-02T03:00:00Z",
        "run_review@" + "b" * 65,
    ],
)
def test_an_id_the_readme_refuses_is_refused(workflow_id: str) -> None:
    with pytest.raises(InvalidWorkflowId):
        parse_workflow_id(workflow_id)
