"""The run's conversation, kept worker-side so the history grows only by what is new.

Workflow code sends ``lw.model`` only the new results of each turn; the activity keeps
every turn as one immutable file under the data dir's bookkeeping
(``.lw/conversations/<workflow id>/<first run id>/turn-NNNNNN.json``), assembles the
whole conversation from them and fits it into the context budget. A turn file is
written once (first writer wins, atomically), so a retried or duplicated activity gets
the reply the first attempt recorded, and workers sharing the data dir agree. When the
files are gone (another data dir, a cleaned ``.lw``) the activity says so and the
workflow resends what it holds: its run's turns, or after continue-as-new a bounded
tail, the rest summarised as unavailable.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from ._protocol import Exchange, ModelResponse, ToolCall, ToolResult, Usage
from ._tools import clip

#: Conservative bytes per token for the budget estimate (English text and JSON run at
#: about 4; code and non-Latin scripts lower).
BYTES_PER_TOKEN = 3
#: The default context budget of a turn, in tokens.
DEFAULT_CONTEXT_BUDGET = 120_000
_CACHED_CONVERSATIONS = 64


class TurnRecord(BaseModel):
    """One turn as stored: the results answering the previous turn's calls, and the
    model's reply (turn 0 holds the task instead of results)."""

    turn: int
    task: str = ""
    results: list[ToolResult] = Field(default_factory=list)
    reply: ModelResponse
    #: The workflow run that asked the model (``None``: written from the workflow's
    #: own history, or before runs were recorded).
    run_id: str | None = None

    def asked(self) -> ModelResponse:
        """The reply as ``lw.model`` returns it: with the run that asked it."""
        return self.reply.model_copy(update={"run_id": self.run_id})


class Summary(BaseModel):
    """A compaction: at turn ``made_at`` the turns before ``upto`` were replaced by
    ``text``, a summary the model wrote (``usage`` is what writing it cost)."""

    made_at: int
    upto: int
    text: str
    usage: Usage = Field(default_factory=Usage)


class ConversationMissing(Exception):
    """Turn files the activity needs are absent: the workflow must resend them."""

    def __init__(self, turn: int) -> None:
        super().__init__(turn)
        self.turn = turn


class ConversationStore:
    """Turn files of every conversation under one root, with a small in-process cache
    (turn files never change once written, so a cached prefix is always valid)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: OrderedDict[Path, list[TurnRecord]] = OrderedDict()
        #: The branch (:meth:`drop_from`) each cached conversation was read on.
        self._branches: dict[Path, str] = {}
        self._summaries: dict[Path, list[Summary]] = {}

    def folder(self, segments: Sequence[str], conversation: str) -> Path:
        return self.root.joinpath(*segments, conversation)

    def _file(self, folder: Path, turn: int) -> Path:
        return folder / f"turn-{turn:06d}.json"

    def _cached(self, folder: Path, branch: str | None = None) -> list[TurnRecord] | None:
        """The cached turns, unless a reset made another branch of them since (in any
        process: one look for the folder's branch mark, unless ``branch`` is it)."""
        cached = self._cache.get(folder)
        if branch is None and cached is not None:
            branch = _branch_of(folder)
        if cached is not None and self._branches.get(folder, "") != branch:
            self._cache.pop(folder, None)
            self._summaries.pop(folder, None)
            return None
        return cached

    def get(self, folder: Path, turn: int) -> TurnRecord | None:
        cached = self._cached(folder)
        if cached is not None and turn < len(cached):
            return cached[turn]
        try:
            data = self._file(folder, turn).read_bytes()
            return TurnRecord.model_validate_json(data)
        except (FileNotFoundError, ValidationError, ValueError):
            return None

    def load(self, folder: Path, upto: int) -> list[TurnRecord]:
        """Turns ``0..upto-1``; raises ConversationMissing naming the first absent one."""
        branch = _branch_of(folder)
        records = list(self._cached(folder, branch) or [])[:upto]
        for turn in range(len(records), upto):
            record = self.get(folder, turn)
            if record is None or record.turn != turn:
                raise ConversationMissing(turn)
            records.append(record)
        self._remember(folder, records)
        self._branches[folder] = branch
        return records

    def put(self, folder: Path, record: TurnRecord) -> TurnRecord:
        """Write a turn once; when another attempt got there first, return its record."""
        target = self._file(folder, record.turn)
        if not _write_once(target, record.model_dump_json().encode()):
            existing = self.get(folder, record.turn)
            if existing is not None:
                return existing
            _write_once(target, record.model_dump_json().encode(), replace=True)  # damaged
        return record

    def drop_from(self, folder: Path, turn: int) -> None:
        """Forget the turns from ``turn`` on, and the summaries made at them: another
        run of the conversation's chain asked them, and this run starts over from
        before them (a reset), so they belong to a branch it abandoned."""
        self._cache.pop(folder, None)
        self._summaries.pop(folder, None)
        # other processes' caches see the new branch mark and read the files again
        _write_once(folder / _BRANCH, uuid.uuid4().hex.encode(), replace=True)
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(folder):
                name, _, number = entry.name.removesuffix(".json").partition("-")
                if name in ("turn", "summary") and number.isdigit() and int(number) >= turn:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.path)

    def drop_other_lineage(self, folder: Path, exchanges: Sequence[Exchange]) -> int | None:
        """Drop the turns from the first of ``exchanges`` (what a run holds) that another
        run asked in the files (a reset's branch, in place of this run's lineage), for
        :meth:`rebuild` to write them from the exchanges; that turn, if any."""
        for exchange in sorted(exchanges, key=lambda e: e.turn):
            asked = exchange.reply.run_id
            record = None if asked is None else self.get(folder, exchange.turn)
            if record is not None and record.run_id not in (None, asked):
                self.drop_from(folder, exchange.turn)
                return exchange.turn
        return None

    def summary(self, folder: Path, turn: int) -> Summary | None:
        """The newest summary made at or before ``turn`` (compaction), if any."""
        if self._branches.get(folder, "") != _branch_of(folder):
            self._summaries.pop(folder, None)
        cached = self._summaries.get(folder)
        if cached is None:
            cached = []
            for path in sorted(folder.glob("summary-*.json")):
                with contextlib.suppress(OSError, ValidationError, ValueError):
                    cached.append(Summary.model_validate_json(path.read_bytes()))
            self._summaries[folder] = cached
            while len(self._summaries) > _CACHED_CONVERSATIONS:
                self._summaries.pop(next(iter(self._summaries)))
        made = [s for s in cached if s.made_at <= turn]
        return max(made, key=lambda s: s.made_at) if made else None

    def put_summary(self, folder: Path, summary: Summary) -> Summary:
        """Record a compaction once (first writer wins, like a turn)."""
        target = folder / f"summary-{summary.made_at:06d}.json"
        self._summaries.pop(folder, None)
        if not _write_once(target, summary.model_dump_json().encode()):
            with contextlib.suppress(OSError, ValidationError, ValueError):
                return Summary.model_validate_json(target.read_bytes())
            _write_once(target, summary.model_dump_json().encode(), replace=True)
        return summary

    def forget(self) -> None:
        """Drop the in-process cache (the files stay the source of truth)."""
        self._cache.clear()
        self._summaries.clear()

    def _remember(self, folder: Path, records: list[TurnRecord]) -> None:
        self._cache[folder] = records
        self._cache.move_to_end(folder)
        while len(self._cache) > _CACHED_CONVERSATIONS:
            self._cache.popitem(last=False)

    def rebuild(self, folder: Path, task: str, exchanges: Sequence[Exchange], upto: int) -> None:
        """Write the turns ``0..upto-1`` that are absent from what the workflow holds
        (``exchanges``, possibly only a tail); turns it no longer holds become one
        placeholder each, so the conversation stays in protocol order."""
        held = {e.turn: e for e in exchanges}
        for turn in range(upto):
            if self.get(folder, turn) is not None:
                continue
            exchange = held.get(turn)
            previous = held.get(turn - 1)
            reply = (
                exchange.reply.model_copy(update={"run_id": None})
                if exchange is not None
                else ModelResponse(text=f"(turn {turn + 1} is no longer available)")
            )
            results = previous.results if previous is not None and exchange is not None else []
            asked = exchange.reply.run_id if exchange is not None else None
            self.put(folder, TurnRecord(turn=turn, task=task if turn == 0 else "", results=results,
                                        reply=reply, run_id=asked))  # fmt: skip


def on_lineage(records: Sequence[TurnRecord], prior_run: str | None) -> bool:
    """Whether the turns read are of the lineage of a run whose previous turn
    ``prior_run`` asked (unknown, or written from a workflow's history: taken as it)."""
    if not records or prior_run is None:
        return True
    return records[-1].run_id in (None, prior_run)


#: A conversation folder's branch mark, written when a reset drops turns.
_BRANCH = "branch"


def _branch_of(folder: Path) -> str:
    try:
        return (folder / _BRANCH).read_text()
    except (FileNotFoundError, NotADirectoryError, UnicodeDecodeError):
        return ""


def _write_once(target: Path, data: bytes, *, replace: bool = False) -> bool:
    """Write ``target`` atomically unless it exists (``False`` then), or over it.

    No fsync (it was a fifth of a small agent's wall time, on the event loop): a turn
    lost to a power cut, or left empty by one, reads as absent, and :meth:`rebuild`
    writes it again from the exchanges the workflow's history holds."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".turn-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        if replace:
            os.replace(tmp, target)
            tmp = ""
            return True
        try:
            os.link(tmp, target)
        except FileExistsError:
            return False
        return True
    finally:
        if tmp:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


CUT_NOTE = (
    "Your previous reply was cut off at the output token limit. Continue where you "
    "stopped, in shorter steps: call a tool, or finish."
)


def answer_all(
    turn: int, calls: Sequence[ToolCall], results: Sequence[ToolResult]
) -> list[ToolResult]:
    """Exactly one result per call, in call order (the protocols require it)."""
    by_id = {r.call_id: r for r in results}
    return [
        by_id.get(call.id)
        or ToolResult(
            call_id=call.id,
            tool=call.name,
            turn=turn,
            text="not run: an earlier call in the same reply ended the run",
            is_error=True,
        )
        for call in calls
    ]


def exchanges_of(records: Sequence[TurnRecord], pending: Sequence[ToolResult]) -> list[Exchange]:
    """The conversation as exchanges: each reply with the results answering it."""
    out: list[Exchange] = []
    for index, record in enumerate(records):
        results = records[index + 1].results if index + 1 < len(records) else pending
        note = CUT_NOTE if record.reply.stop_reason == "max_tokens" else ""
        if not record.reply.tool_calls and not note and index + 1 < len(records):
            note = "(continue)"
        out.append(
            Exchange(
                turn=record.turn,
                reply=record.reply,
                results=answer_all(record.turn, record.reply.tool_calls, results),
                note=note,
            )
        )
    return out


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogateescape"))


def _reply_size(reply: ModelResponse) -> int:
    return _size(reply.text) + sum(
        _size(c.name) + _size(str(c.arguments)) + 32 for c in reply.tool_calls
    )


def tokens(size: int) -> int:
    return size // BYTES_PER_TOKEN + 1


#: Once a conversation is over its budget, its oldest results are cleared until what
#: it adds to the fixed part (system prompt, tools, task, summary) is down to this share
#: of the room left: one clearing frees a large batch, so clearings are rare and a
#: prompt cache keeps hitting between two of them (the idea of the provider's
#: ``clear_at_least``).
CLEAR_TO = 0.1
#: When what no clearing removes (replies, the notes left by cleared results) takes
#: more than this share of the room, the older turns are compacted into a summary.
COMPACT_AT = 0.6
#: Bytes a cleared result's note is counted as (its text names the saved file).
NOTE_BYTES = 200
#: The least UTF-8 bytes a newest result keeps when the newest results alone outgrow
#: the budget (each is cut to its share of the room, the whole of it saved).
CUT_FLOOR = 2048
#: Why a result could not be saved in the agent's scratch.
UNSAVED = "a link or a file is in the way in /mnt/scratch/own/, or the scratch is full"


@dataclass(frozen=True)
class Fitted:
    """A conversation fitted into the budget.

    ``cleared``: leading results replaced by a note; ``stable``: how many of them the
    previous turn had cleared already (the prefix up to there is what that turn sent
    too, so a cache breakpoint there stays valid across this turn's clearing);
    ``compact``: clearing alone leaves too little room, the older turns should be
    compacted."""

    exchanges: list[Exchange]
    cleared: int
    stable: int
    compact: bool


def fit(
    exchanges: list[Exchange],
    fixed_bytes: int,
    budget_tokens: int,
    save: Callable[[ToolResult], str | None],
) -> Fitted:
    """Clear the oldest tool results when the conversation is over ``budget_tokens``.

    The decision is replayed turn by turn, so the cleared prefix only grows and stays
    the same between clearings. Once over budget, results are cleared in one batch
    down to CLEAR_TO of the room (not just under the budget): the next clearing is then
    many turns away. A cleared result is replaced by where its output is saved
    (``save`` returns that path, or ``None`` when it could not save it). The newest
    turn's results are never cleared; when they alone outgrow the budget, each is cut
    to its share of the room and saved whole.
    """
    budget = budget_tokens * BYTES_PER_TOKEN
    room = max(budget - fixed_bytes, 0)
    flat = [(i, j) for i, e in enumerate(exchanges) for j in range(len(e.results))]
    sizes = {(i, j): _size(exchanges[i].results[j].text) + 64 for i, j in flat}
    cleared = stable = 0  # results cleared, a prefix of `flat`
    compact = False
    running = fixed_bytes
    for index, exchange in enumerate(exchanges):
        stable = cleared
        running += _reply_size(exchange.reply) + _size(exchange.note)
        running += sum(sizes[(index, j)] for j in range(len(exchange.results)))
        compact = False
        if running <= budget:
            continue
        last_clearable = sum(len(e.results) for e in exchanges[:index])
        while running > fixed_bytes + room * CLEAR_TO and cleared < last_clearable:
            running -= max(sizes[flat[cleared]] - NOTE_BYTES, 0)
            cleared += 1
        # What stays whatever is cleared, the newest results aside (cleared next turn).
        left = sum(max(sizes[flat[k]] - NOTE_BYTES, 0) for k in range(cleared, len(flat)))
        compact = index >= 2 and running - left - fixed_bytes > room * COMPACT_AT
    out = exchanges
    if cleared:
        out = [e.model_copy(update={"results": list(e.results)}) for e in exchanges]
        for i, j in flat[:cleared]:
            result = out[i].results[j]
            where = result.ref or save(result)
            text = (
                f"[cleared to fit the context budget: {_size(result.text)} bytes, "
                f"saved in {where}: re-read it with sed -n, head -c or grep]"
                if where is not None
                else f"[cleared to fit the context budget: {_size(result.text)} bytes; it "
                f"could not be saved ({UNSAVED})]"
            )
            out[i].results[j] = result.model_copy(update={"text": text})
    if exchanges and running > budget:
        out = _cut_newest(out, running, budget, save)
    return Fitted(out, cleared, stable, compact)


def _cut_newest(
    exchanges: list[Exchange], running: int, budget: int, save: Callable[[ToolResult], str | None]
) -> list[Exchange]:
    """When the newest results alone outgrow the budget (one reply of many parallel
    reads), each keeps an equal share of the room left for them, at least CUT_FLOOR
    bytes: its head and tail, and where the whole of it is saved."""
    newest = exchanges[-1]
    total = sum(_size(r.text) + 64 for r in newest.results)
    if not newest.results:
        return exchanges
    share = max((budget - (running - total)) // len(newest.results), CUT_FLOOR) - 64
    results = []
    for result in newest.results:
        size = _size(result.text)
        if size <= share:
            results.append(result)
            continue
        where = result.ref or save(result)
        whole = (
            f"the whole {size} bytes are in {where}: re-read them with sed -n, head -c or grep"
            if where is not None
            else f"the whole {size} bytes could not be saved ({UNSAVED})"
        )
        note = f"\n[cut to fit the context budget beside the other results of this turn; {whole}]"
        text = clip(result.text, max(share - _size(note), 256)) + note
        results.append(result.model_copy(update={"text": text}))
    return [*exchanges[:-1], newest.model_copy(update={"results": results})]
