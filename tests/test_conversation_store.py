"""A turn file is written once: a retried or duplicated ``lw.model`` attempt (another
worker on the same data dir) gets the reply the first one recorded, and a damaged or
absent file is reported as missing, never read as a shorter conversation."""

from __future__ import annotations

from pathlib import Path

import pytest

from lw_temporal import ModelResponse, ToolCall
from lw_temporal._agent._conversation import ConversationMissing, ConversationStore, TurnRecord


def _record(turn: int, text: str) -> TurnRecord:
    return TurnRecord(
        turn=turn,
        reply=ModelResponse(text=text, tool_calls=[ToolCall(name="bash", id=f"c{turn}")]),
    )


def test_the_first_writer_wins_and_every_worker_reads_its_reply(tmp_path: Path) -> None:
    one, two = ConversationStore(tmp_path), ConversationStore(tmp_path)
    folder = one.folder(["run_x@1"], "abc")
    assert one.put(folder, _record(0, "first")).reply.text == "first"
    assert two.put(folder, _record(0, "second")).reply.text == "first"
    assert [r.reply.text for r in two.load(folder, 1)] == ["first"]
    assert not list(folder.glob(".turn-*"))  # no temporary files left behind


def test_an_absent_or_damaged_turn_is_missing(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    folder = store.folder(["run_x@1"], "abc")
    store.put(folder, _record(0, "a"))
    store.put(folder, _record(2, "c"))
    with pytest.raises(ConversationMissing) as missing:
        ConversationStore(tmp_path).load(folder, 3)
    assert missing.value.turn == 1
    (folder / "turn-000001.json").write_text("{not json")
    with pytest.raises(ConversationMissing):
        ConversationStore(tmp_path).load(folder, 3)
    # A rewrite replaces the damaged file.
    store.put(folder, _record(1, "b"))
    texts = [r.reply.text for r in ConversationStore(tmp_path).load(folder, 3)]
    assert texts == ["a", "b", "c"]
