"""Prompt-cache hits and cost of lw's context management, under Anthropic's cache rules.

The real ``AnthropicModel`` drives a planner on a dev server (real worker, sandboxed
bash printing ``--output`` bytes per turn) through the real ``anthropic`` SDK, whose
HTTP transport is a loopback stand-in that applies the documented prompt-cache rules
to each request it receives (``tests/_prompt_cache.py``: prefix match up to each
breakpoint, the 20-block lookback, the 1024-token minimum, at most four breakpoints,
writes at 1.25x and reads at 0.1x). Printed per session: the share of input tokens
read from the cache, and the billed-equivalent input cost against a perfect cache over
the same requests.

Sessions: ``--turns`` (70) with ``--budget`` (20000 tokens, so results are cleared),
the same with a budget nothing reaches (the accounting's baseline), and ``--long``
(500) turns, which clearing alone cannot fit (compaction).

Pass criteria printed at the end: the cleared session reads at least 85% of its input
from the cache at no more than 1.3x the ideal cost, and the long session finishes.

    python benchmarks/prompt_cache.py [--turns 70] [--long 500] [--output 4096]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from temporalio.client import Client

from lw_temporal.testing import dev_environment
from tests._prompt_cache import Session, run_session


async def _session(client: Client, turns: int, size: int, budget: int) -> Session:
    with tempfile.TemporaryDirectory() as data:
        queue = f"bench-{uuid.uuid4().hex[:8]}"
        return await run_session(client, Path(data), queue, turns=turns, size=size, budget=budget)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=70)
    parser.add_argument("--long", type=int, default=500)
    parser.add_argument("--output", type=int, default=4096)
    parser.add_argument("--budget", type=int, default=20_000)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    rows: list[tuple[str, Session, float]] = []
    async with dev_environment() as env:
        for name, turns, budget in (
            (f"{args.turns} turns, budget {args.budget}", args.turns, args.budget),
            (f"{args.turns} turns, nothing cleared", args.turns, 10_000_000),
            (f"{args.long} turns, budget {args.budget}", args.long, args.budget),
        ):
            started = time.monotonic()
            session = await _session(env.client, turns, args.output, budget)
            rows.append((name, session, time.monotonic() - started))
    for name, session, seconds in rows:
        print(f"{name}: {session.totals.line()}; {session.compactions} compactions; "
              f"{session.result.turns} turns in {seconds:.0f}s")  # fmt: skip
    cleared, _, long = (r[1] for r in rows)
    ok = (
        cleared.totals.hit_fraction >= 0.85
        and cleared.totals.cost_ratio <= 1.3
        and long.result.turns == args.long + 1
    )
    print(
        f"{'PASS' if ok else 'FAIL'}: cleared session {cleared.totals.hit_fraction:.1%} read "
        f"(>= 85%), {cleared.totals.cost_ratio:.2f}x ideal (<= 1.3x); long session "
        f"{long.result.turns} turns (expected {args.long + 1})"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
