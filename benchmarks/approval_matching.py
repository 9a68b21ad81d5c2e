"""What matching approval rules costs in workflow code, against Python's ``re``, measured
in the same run.

    python benchmarks/approval_matching.py [--sizes 1024,65536,262144]

For hostile patterns a rule could hold, on commands that defeat them (no match): the
time RE2 (the rules' engine) takes at each size up to what ``lw.bash`` accepts, and the
largest command Python's ``re`` gets through in about half a second with the same
pattern, with RE2's time on that same command (the ratio). ``re``'s time doubles with
every character or two; RE2's grows with the length. Then the cost of asking which rules
match for a reply of 20 ordinary calls: what the agent loop adds to a turn.
"""

from __future__ import annotations

import argparse
import functools
import re
import time
from collections.abc import Callable

from lw_temporal import ApprovalRule, Role
from lw_temporal._approvals._actions import actions_of
from lw_temporal._approvals._rules import compiled, first_match

PATTERNS = (r"(a+)+$", r"(a|aa)+$", r"^(\w+\s?)*$")
RE_BUDGET_SECONDS = 0.5


def _timed(run: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def _hostile(size: int) -> str:
    return "a" * size + "!"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1024,65536,262144")
    sizes = [int(s) for s in parser.parse_args().sizes.split(",")]
    print(f"{'pattern':<14}" + "".join(f"{f'RE2 {s} chars':>18}" for s in sizes)
          + f"{'re gets through':>18}{'re ms':>8}{'RE2 ms':>9}{'re/RE2':>10}")  # fmt: skip
    for pattern in PATTERNS:
        fast, slow = compiled(pattern), re.compile(pattern)
        row = [_timed(functools.partial(fast.search, _hostile(size))) for size in sizes]
        n, spent = 8, 0.0
        while spent < RE_BUDGET_SECONDS:
            n += 1
            command = _hostile(n)
            spent = _timed(functools.partial(slow.search, command), repeat=1)
        same = _timed(functools.partial(fast.search, command))
        cells = "".join(f"{t * 1000:15.3f} ms" for t in row)
        print(f"{pattern:<14}{cells}{n:>12} chars{spent * 1000:8.0f}{same * 1000:9.4f}"
              f"{spent / same:>9,.0f}x")  # fmt: skip
    rules = (
        ApprovalRule(tool="bash", command=r"\bgit\s+push\b"),
        ApprovalRule(tool="memory_write", store="org"),
        ApprovalRule(tool="run_step", more_than=5),
    )
    calls = [("bash", {"command": f"grep -rn TODO src/ | head -{i}"}) for i in range(10)]
    calls += [("memory_read", {"path": f"/mnt/memory/workflow/n{i}.md"}) for i in range(10)]

    def turn() -> None:
        for name, arguments in calls:
            first_match(rules, actions_of(name, arguments), Role.PLANNER)

    per_turn = _timed(turn, repeat=20)
    print(f"a reply of {len(calls)} calls against {len(rules)} rules: {per_turn * 1e6:.0f} µs")


if __name__ == "__main__":
    main()
