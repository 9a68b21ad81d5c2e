"""Memory search on a store of 10,000 notes, against baselines measured in the same run.

    python benchmarks/memory_search.py [--notes 10000] [--queries 200] [--appends 20]

1. Building the index from the files (a store's first search), and its size against
   the notes' size.
2. Query latency by words (``MemoryStores.search``): p50 and p95 of ``--queries``
   questions (target: p95 < 50 ms), wall and this process's CPU time (on a busy shared
   machine the wall time is mostly waiting for a core); and by words and meaning with an in-process
   embedder (256 dimensions, every chunk embedded), which adds scoring every chunk's
   vector in Python (the embedder's own round trip is not counted).
3. The commit's cost of keeping the index: p50 of one-line appends through the
   ``lw.memory.append`` activity to notes of the store with its index, against the
   same appends with no index (10 alternating rounds, each after ``sync`` and a few
   untimed appends; target: < 2x).
4. Recall on a labelled set: 20 notes that answer 20 questions phrased with the notes'
   words, planted among the others; recall@1 and @5 of the search, against
   ``grep -ril`` with the question as a phrase and with any of its words (which finds
   them, among how many files, at the cost of a scan of the whole store).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import os
import random
import re
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from temporalio.testing import ActivityEnvironment

from lw_temporal import LittleWorkflowPlugin, MemoryQuota, WorkflowDefinition
from lw_temporal.memory import MemoryAppendRequest, MemoryStores, StoreKind, StoreRef
from lw_temporal.memory._search import Query, SearchTarget, run_search

STORE = StoreRef(StoreKind.WORKFLOW, "bench")
QUOTA = MemoryQuota(max_bytes=1 << 34, max_files=100_000, max_file_bytes=1 << 30)
LINE = "- a lesson learned while benchmarking the memory store, one line.\n"
COMMON = str.split(
    "the of and to in is that it for on with as was at by be this are from or have an not "
    "but we they which you one all were when there can more if will out so up what about "
    "into than them some could time only new these two may then do first any my now such "
    "like our over also back after use work well way even want because most good people "
    "run step check team deploy build test service data user file note lesson review fix"
)
PAIRS = [
    ("To rotate the staging database credentials, open the vault console and run rotate.",
     "how do I rotate credentials for the staging database"),
    ("The canary deploy times out when the health probe path is wrong; fix the probe path.",
     "why does the canary deploy time out"),
    ("Flaky integration tests usually come from shared fixtures; isolate each fixture.",
     "what causes flaky integration tests"),
    ("Candidates from the referral program need a second interviewer from another team.",
     "do referral candidates need a second interviewer"),
    ("Invoices over ten thousand euros need approval from the finance director.",
     "who approves invoices over ten thousand euros"),
    ("When the pager fires at night, acknowledge within five minutes or it escalates.",
     "how fast must I acknowledge the pager at night"),
    ("Backups of the ledger run hourly and are kept for ninety days in cold storage.",
     "how long are ledger backups kept"),
    ("The search cluster needs a reindex after every mapping change.",
     "what to do after a mapping change on the search cluster"),
    ("Customer exports must strip email addresses before leaving the warehouse.",
     "must customer exports strip email addresses"),
    ("Use the blue runner pool for builds that need a GPU.",
     "which runner pool has a GPU for builds"),
    ("Memory leaks in the gateway show up as slow latency growth over days.",
     "how do gateway memory leaks show up"),
    ("The style guide prefers short sentences and active verbs in release notes.",
     "what does the style guide say about release notes"),
    ("Certificates for internal services renew automatically thirty days before expiry.",
     "when do internal service certificates renew"),
    ("Retry payment webhooks with exponential backoff, at most eight attempts.",
     "how many attempts when retrying payment webhooks"),
    ("The onboarding checklist includes laptop setup, badge, and a security training.",
     "what is on the onboarding checklist"),
    ("Kafka consumer lag above ten minutes pages the data platform team.",
     "when does kafka consumer lag page someone"),
    ("Feature flags older than six months are removed during the quarterly cleanup.",
     "when are old feature flags removed"),
    ("Translations are frozen two weeks before a major release.",
     "when are translations frozen before a release"),
    ("Interview feedback is due within one business day of the interview.",
     "when is interview feedback due"),
    ("The mobile app crashes on startup if the cached token is malformed; clear the cache.",
     "why does the mobile app crash on startup"),
]  # fmt: skip

_T = TypeVar("_T")


class LocalEmbedder:
    """An in-process stand-in for an embeddings API: hashed words in 256 dimensions."""

    name = "bench:hash:256"

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            vec = [0.0] * 256
            for word in re.findall(r"\w+", text.lower()):
                vec[int(hashlib.md5(word.encode()).hexdigest()[:4], 16) % 256] += 1.0
            out.append(vec)
        return out


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    """Common words first (Zipf's head), then the labelled set's own words (so the
    other notes share them, as a real store's notes share its topics), then made-up
    words for the long tail."""
    syllables = str.split("ka lo mi ne ru sa ti vo pe da fi gu ho ja be co re st an el")
    topical = sorted(
        {w for pair in PAIRS for w in re.findall(r"[a-z]+", " ".join(pair).lower())} - set(COMMON)
    )
    rng.shuffle(topical)
    tail = sorted({"".join(rng.choices(syllables, k=rng.randint(2, 4))) for _ in range(size)})
    return COMMON + tail[:100] + topical + tail[100:]


def build_store(base: Path, notes: int) -> tuple[LittleWorkflowPlugin, dict[str, str]]:
    """A store of ``notes`` markdown notes (Zipf-distributed words), 20 of them the
    answers of the labelled questions; returns the plugin and question -> answer file."""
    rng = random.Random(29)
    words = _vocabulary(rng, 6000)
    weights = [1 / (rank + 1) for rank in range(len(words))]
    plugin = LittleWorkflowPlugin(base / "data", [WorkflowDefinition(id="bench", quota=QUOTA)])
    # The appends run in an ActivityEnvironment, so without caller checks (which need a
    # server; benchmarks/callers.py measures what they add to a pipeline).
    plugin.config.callers.enabled = False
    root = plugin.memory.root(STORE)
    answers = dict(zip(rng.sample(range(notes), len(PAIRS)), PAIRS, strict=True))
    labelled: dict[str, str] = {}
    for n in range(notes):
        rel = f"topic-{n % 40}/note-{n}.md"
        lines = [f"# Note {n}", ""]
        for _ in range(rng.randint(4, 9)):
            lines.append(" ".join(rng.choices(words, weights, k=rng.randint(8, 16))) + ".")
        if n in answers:
            answer, question = answers[n]
            lines.insert(rng.randint(2, len(lines)), answer)
            labelled[question] = rel
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("\n".join(lines) + "\n")
    plugin.memory.recount(STORE)  # files made by hand: counted once
    return plugin, labelled


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def queries(stores: MemoryStores, rng: random.Random, n: int) -> list[str]:
    texts = [q for _a, q in PAIRS]
    return [rng.choice(texts) if i % 2 else " ".join(rng.sample(COMMON, 3)) for i in range(n)]


async def _thread(fn: Callable[[threading.Event], _T]) -> _T:
    return await asyncio.to_thread(fn, threading.Event())


def query_latency(stores: MemoryStores, n: int) -> None:
    rng = random.Random(3)
    asked = queries(stores, rng, n)
    words, cpu = [], []
    for q in asked:
        t, c = time.perf_counter(), time.process_time()
        stores.search(STORE, q)
        words.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    print(f"  by words             p50 {_p(words, 0.5):6.2f} ms  p95 {_p(words, 0.95):6.2f} ms "
          f"(target p95 < 50 ms; CPU time p50 {_p(cpu, 0.5):.2f} ms, p95 "
          f"{_p(cpu, 0.95):.2f} ms)")  # fmt: skip
    embedder = LocalEmbedder()
    target = [SearchTarget(STORE)]
    began = time.perf_counter()
    while True:  # embed every chunk first (each search embeds up to 256)
        query = Query(stores, target, "warm up", 10, embedder.name)
        result = asyncio.run(run_search(query, embedder, _thread))
        if not any("no embedding yet" in note for note in result.notes):
            break
    print(f"  (embedding every chunk took {time.perf_counter() - began:.1f} s in searches)")
    both = []
    for q in asked[: max(20, n // 4)]:
        t = time.perf_counter()
        asyncio.run(run_search(Query(stores, target, q, 10, embedder.name), embedder, _thread))
        both.append(time.perf_counter() - t)
    print(f"  by words and meaning p50 {_p(both, 0.5):6.2f} ms  p95 {_p(both, 0.95):6.2f} ms "
          "(every chunk's vector scored in Python)")  # fmt: skip


async def _appends(plugin: LittleWorkflowPlugin, env: ActivityEnvironment, n: int, tag: str
                   ) -> list[float]:  # fmt: skip
    out = []
    for i in range(n):
        env.info = dataclasses.replace(env.info, activity_id=f"{tag}-{i}")
        path = f"/mnt/memory/workflow/topic-{i % 40}/note-{i}.md"
        t = time.perf_counter()
        await env.run(plugin.memory_activities.append, MemoryAppendRequest(path=path, content=LINE))
        out.append(time.perf_counter() - t)
    return out


def _round(plugin: LittleWorkflowPlugin, env: ActivityEnvironment, n: int, tag: str
           ) -> list[float]:  # fmt: skip
    """``n`` timed appends, after what is still unwritten from before is flushed and a
    few untimed appends warm the caches: the steady cost of each."""
    os.sync()
    asyncio.run(_appends(plugin, env, 3, f"{tag}-warm"))
    return asyncio.run(_appends(plugin, env, n, tag))


def append_cost(plugin: LittleWorkflowPlugin, n: int, rounds: int = 10) -> None:
    """Rounds with and without the index alternate; "without" moves the index's pointer
    aside (the commit then finds no index, as in a store never searched) and back."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, workflow_id="run_bench@1", workflow_type="lw.Planner")
    index = plugin.memory.files(STORE).search
    plugin.memory.search_index(STORE)
    aside = index.pointer.with_name("current.aside")
    kept: list[float] = []
    bare: list[float] = []
    for r in range(rounds):
        kept += _round(plugin, env, n, f"kept{r}")
        index.pointer.rename(aside)
        bare += _round(plugin, env, n, f"bare{r}")
        aside.rename(index.pointer)
    k, b = statistics.median(kept) * 1000, statistics.median(bare) * 1000
    print(f"  lw.memory.append with the index  p50 {k:6.3f} ms")
    print(f"  lw.memory.append without index   p50 {b:6.3f} ms")
    print(f"  -> ratio {k / b:.2f}x (target < 2x)")


def recall(stores: MemoryStores, labelled: dict[str, str]) -> None:
    root = stores.root(STORE)
    at1 = at5 = phrase = anyword = 0
    listed: list[int] = []
    search_t: list[float] = []
    grep_t: list[float] = []
    for question, answer in labelled.items():
        t = time.perf_counter()
        hits = [h.path for h in stores.search(STORE, question, limit=5).hits]
        search_t.append(time.perf_counter() - t)
        at1 += hits[:1] == [answer]
        at5 += answer in hits
        grep = ["grep", "-rilF", question, str(root)]
        found = subprocess.run(grep, capture_output=True, text=True, check=False).stdout
        phrase += f"/{answer}" in found
        words = [w for w in re.findall(r"\w+", question.lower()) if w not in COMMON and len(w) > 2]
        t = time.perf_counter()
        grep = ["grep", "-rilE", "|".join(words), str(root)]
        found = subprocess.run(grep, capture_output=True, text=True, check=False).stdout
        grep_t.append(time.perf_counter() - t)
        anyword += f"/{answer}" in found
        listed.append(len(found.splitlines()))
    n = len(labelled)
    print(f"  memory search        recall@1 {at1 / n:4.0%}  recall@5 {at5 / n:4.0%}  "
          f"(5 files shown)  p50 {_p(search_t, 0.5):6.2f} ms")  # fmt: skip
    print(f"  grep -ril phrase     recall   {phrase / n:4.0%}")
    print(f"  grep -rilE any word  recall   {anyword / n:4.0%}  (among a median of "
          f"{statistics.median(listed):.0f} files, unranked)  "
          f"p50 {_p(grep_t, 0.5):6.2f} ms")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--appends", type=int, default=20, help="per round (10 rounds)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lw-bench-") as tmp:
        plugin, labelled = build_store(Path(tmp), args.notes)
        stores = plugin.memory
        notes_bytes = stores.usage(STORE).live
        t = time.perf_counter()
        stores.search_index(STORE)
        built = time.perf_counter() - t
        index_bytes = stores.usage(STORE).index
        print(f"store of {args.notes} notes, {notes_bytes / 1e6:.1f} MB")
        print(f"  index built from the files in {built:.2f} s; {index_bytes / 1e6:.1f} MB, "
              f"{index_bytes / notes_bytes:.2f}x the notes")  # fmt: skip
        print(f"\nquery latency ({args.queries} queries)")
        query_latency(stores, args.queries)
        print(f"\none-line appends to notes of the store, 10 rounds of {args.appends} each way")
        append_cost(plugin, args.appends)
        print(f"\nrecall on {len(labelled)} labelled questions")
        recall(stores, labelled)


if __name__ == "__main__":
    main()
