"""The bash pre-check alone on real-world command lines: what it refuses, and its cost.

Two corpora, each checked as a worker step (own scratch ``/mnt/scratch/own``; memory,
org and its planner's scratch read-only):

- ``benchmarks/data/command_lines.txt``, this project's own: a few hundred command
  lines an agent runs, each labelled with the verdict the pre-check owes it, so false
  refusals and false acceptances are counted exactly;
- with ``--pages DIR``, a checked-out collection of command examples in the tldr-pages
  layout (``DIR/pages/<platform>/*.md`` or any ``*.md`` under DIR: one example per
  line in backticks, ``{{placeholders}}`` filled with their text and the first of
  ``[a|b]`` alternatives). Nothing of it is part of this project. Unlabelled, so the
  false refusals counted are those one can tell without a human: a syntax refusal of a
  line ``bash -n`` accepts, or a path refusal whose first component exists neither on
  the host nor in the sandbox. ``--show`` prints every refused line for a reader.

The time per command (median, p95) is that of ``check_command`` with its ``bash -n``
arbiter, measured round-robin against a baseline timed the same way in the same run:
tree-sitter's parse of the same line, which every check pays.

Usage: python benchmarks/precheck_corpus.py [--pages DIR] [--platforms common,linux]
       [--show] [--rounds N]
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lw_temporal import WorkflowDefinition
from lw_temporal._config import LwConfig
from lw_temporal._pathcheck import _parser, check_command
from lw_temporal._pathcheck._canon import reaches
from lw_temporal._scope import Scope

CORPUS = Path(__file__).with_name("data") / "command_lines.txt"
WORKER = "pipeline_bench/sub-runs/run_cr@1/steps/step_1"
_ALTERNATIVES = re.compile(r"\[([^\[\]|]*(?:\|[^\[\]|]*)+)\]")
_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}")


def labelled(path: Path) -> list[tuple[str, str]]:
    """(verdict, command) of the project's corpus (``ok``/``no``, continuations)."""
    items: list[tuple[str, str]] = []
    for line in path.read_text().splitlines():
        if line.startswith("   | ") and items:
            verdict, command = items[-1]
            items[-1] = (verdict, command + "\n" + line[5:])
        elif line[:3] in ("ok ", "no "):
            items.append((line[:2], line[5:]))
    return items


def fill(example: str) -> str:
    """A tldr-style example as a command: each placeholder its own text, the first
    of its ``[a|b]`` alternatives."""

    def one(match: re.Match[str]) -> str:
        return _ALTERNATIVES.sub(lambda alt: alt.group(1).split("|")[0], match.group(1))

    return _PLACEHOLDER.sub(one, example)


def pages(root: Path, platforms: Sequence[str]) -> Iterator[tuple[str, str]]:
    """(page, command) of every example in a tldr-pages style folder."""
    base = root / "pages" if (root / "pages").is_dir() else root
    folders = [base / p for p in platforms if (base / p).is_dir()] or [base]
    for folder in folders:
        for page in sorted(folder.rglob("*.md")):
            for line in page.read_text(errors="replace").splitlines():
                if len(line) > 2 and line.startswith("`") and line.endswith("`"):
                    yield f"{page.parent.name}/{page.stem}", fill(line[1:-1])


def _scope(data_dir: Path) -> Scope:
    config = LwConfig.create(data_dir, [WorkflowDefinition(id="cr")])
    scope = config.scope_of(WORKER, "lw.Worker")
    scope.own_scratch.mkdir(parents=True)
    return scope


def timings(scope: Scope, commands: Sequence[str], rounds: int) -> tuple[list[float], list[float]]:
    """Seconds per command of the check and of the parse alone, taking turns."""
    parser = _parser()
    check: list[float] = []
    parse: list[float] = []
    for _ in range(rounds):
        for command in commands:
            data = command.encode("utf-8", "surrogateescape")
            start = time.perf_counter()
            parser.parse(data)
            middle = time.perf_counter()
            check_command(scope, command)
            end = time.perf_counter()
            parse.append(middle - start)
            check.append(end - middle)
    return check, parse


def _p95(values: list[float]) -> float:
    return sorted(values)[int(len(values) * 0.95)]


def report_times(name: str, check: list[float], parse: list[float]) -> None:
    median, base = statistics.median(check), statistics.median(parse)
    print(
        f"  time per command: median {median * 1e3:.3f} ms, p95 {_p95(check) * 1e3:.3f} ms "
        f"(target: median < 0.1 ms); parse alone {base * 1e3:.3f} ms; check / parse = "
        f"{median / base:.2f}x"
    )


def _bash_accepts(command: str) -> bool:
    done = subprocess.run(["bash", "-n"], input=command.encode(), capture_output=True, check=False)
    return done.returncode == 0


def run_labelled(scope: Scope, rounds: int, show: bool) -> None:
    items = labelled(CORPUS)
    false_refusals: list[tuple[str, str]] = []
    false_acceptances: list[str] = []
    refused = 0
    for verdict, command in items:
        rejection = check_command(scope, command).rejection
        refused += rejection is not None
        if verdict == "ok" and rejection is not None:
            false_refusals.append((command, rejection))
        if verdict == "no" and rejection is None:
            false_acceptances.append(command)
    print(f"\n[{CORPUS.name}] {len(items)} command lines (labelled)")
    print(
        f"  accepted {len(items) - refused}, refused {refused}; false refusals "
        f"{len(false_refusals)} ({len(false_refusals) / len(items):.2%}), false acceptances "
        f"{len(false_acceptances)}"
    )
    for command, rejection in false_refusals:
        print(f"    false refusal: {command!r}: {rejection}")
    for command in false_acceptances:
        print(f"    false acceptance: {command!r}")
    report_times(CORPUS.name, *timings(scope, [c for _, c in items], rounds))
    if show:
        for verdict, command in items:
            print(f"    {verdict} {command!r}: {check_command(scope, command).rejection}")


def run_pages(scope: Scope, root: Path, platforms: Sequence[str], show: bool) -> None:
    items = list(pages(root, platforms))
    if not items:
        print(f"\n[{root}] no examples found")
        return
    kinds: collections.Counter[str] = collections.Counter()
    tops: collections.Counter[str] = collections.Counter()
    false: list[tuple[str, str, str]] = []
    refusals: list[tuple[str, str, str]] = []
    for page, command in items:
        rejection = check_command(scope, command).rejection
        if rejection is None:
            continue
        kind, _, path = rejection.partition(": ")
        kinds[kind] += 1
        refusals.append((page, command, rejection))
        if kind.startswith("path is"):
            path = path.split(";")[0]
            tops["/" + path.lstrip("/").split("/")[0]] += 1
            if not reaches(path):
                false.append((page, command, rejection))
        elif _bash_accepts(command):
            false.append((page, command, rejection))
    refused = sum(kinds.values())
    print(f"\n[{root} {','.join(platforms)}] {len(items)} command lines (unlabelled)")
    print(f"  accepted {len(items) - refused}, refused {refused} ({refused / len(items):.2%}):")
    for kind, count in kinds.most_common():
        print(f"    {count:6} {kind}")
    top = ", ".join(f"{t} {n}" for t, n in tops.most_common(12))
    print(f"  refused paths by first component: {top}")
    print(
        f"  false refusals one can tell without a human: {len(false)} "
        f"({len(false) / len(items):.3%}; target <= 0.1%)"
    )
    for page, command, rejection in false:
        print(f"    {page}: {command!r}: {rejection}")
    report_times(str(root), *timings(scope, [c for _, c in items], 1))
    if show:
        for page, command, rejection in refusals:
            print(f"    {page}: {command!r}: {rejection}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=Path, help="a tldr-pages style folder checked out")
    parser.add_argument("--platforms", default="common,linux")
    parser.add_argument("--show", action="store_true", help="print every refused line")
    parser.add_argument("--rounds", type=int, default=20, help="timing rounds of the own corpus")
    args = parser.parse_args()
    print(f"load: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as data_dir:
        scope = _scope(Path(data_dir))
        run_labelled(scope, args.rounds, args.show)
        if args.pages is not None:
            run_pages(scope, args.pages, args.platforms.split(","), args.show)


if __name__ == "__main__":
    main()
