"""The scan that runs before anything is written to a memory store.

Memory is read by every future agent of a workflow, so one pasted credential or a
customer's personal data written there leaks to all of them (the seeds' "memory
poisoning"). A :class:`Scanner` sees every write before it lands; a finding marked
``blocking`` refuses the write, others are reported back to the writer. The default
blocks secret shapes and reports personal data, and never echoes a matched secret in
full: findings travel into workflow histories.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from ._base import FrozenModel

FindingKind = Literal["secret", "pii"]


class Finding(FrozenModel):
    """One match of a scan rule; ``excerpt`` is masked, never the whole secret."""

    rule: str
    kind: FindingKind
    blocking: bool
    path: str
    line: int
    excerpt: str


@runtime_checkable
class Scanner(Protocol):
    """Inspects the full new content of one file before it is written.

    ``path`` is relative to the store root. Return every finding; the store refuses
    the write when any of them is ``blocking``. Called in a worker thread, so it may
    block; keep it deterministic for a given content.
    """

    def scan(self, path: str, content: bytes) -> Sequence[Finding]: ...


@dataclass(frozen=True, slots=True)
class Rule:
    """One pattern a scan looks for. ``hint``, when given, is a necessary condition
    checked first (false: the pattern cannot match the text), so that a scan costs a
    few substring tests for the rules whose tell-tale part is absent."""

    name: str
    kind: FindingKind
    blocking: bool
    pattern: re.Pattern[str]
    check: Callable[[str], bool] | None = None
    hint: Callable[[str], bool] | None = None


def _any_of(*needles: str) -> Callable[[str], bool]:
    """A hint for a case-sensitive pattern every match of which holds one of
    ``needles`` literally."""
    return lambda text: any(needle in text for needle in needles)


def _run_of(chars: str, length: int) -> Callable[[str], bool]:
    """A hint for a pattern every match of which is a run of at least ``length``
    characters from ``chars`` and digits (``\\d`` takes other scripts' digits too: a
    text that is not ASCII is always scanned in full)."""
    table = bytes(1 if chr(b) in chars or chr(b).isdigit() else 0 for b in range(256))
    run = b"\x01" * length
    return lambda text: not text.isascii() or run in text.encode("ascii").translate(table)


def _luhn(text: str) -> bool:
    digits = [int(c) for c in text if c.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for index, digit in enumerate(reversed(digits)):
        if index % 2 == 1:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


def _mask(value: str, kind: FindingKind) -> str:
    value = value.strip()
    if kind == "secret":
        return value[:4] + "…" + f"[{len(value)} chars]"
    if len(value) <= 4:
        return "*" * len(value)
    return value[:2] + "*" * (len(value) - 4) + value[-2:]


SECRET_RULES: tuple[Rule, ...] = (
    Rule(
        "private-key",
        "secret",
        True,
        re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
    ),
    Rule(
        "aws-access-key-id",
        "secret",
        True,
        re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
        hint=_any_of("AKIA", "ASIA", "ABIA", "ACCA"),
    ),
    Rule(
        "aws-secret-access-key",
        "secret",
        True,
        re.compile(r"(?i)aws_?secret_?access_?key\W{0,4}[=:]\s*['\"]?[A-Za-z0-9/+=]{40}\b"),
    ),
    Rule(
        "github-token",
        "secret",
        True,
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{50,255})\b"),
        hint=_any_of("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    Rule(
        "slack-token",
        "secret",
        True,
        re.compile(
            r"\bxox[abposr]-[A-Za-z0-9-]{10,}"
            r"|https://hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]+"
        ),
        hint=_any_of("xox", "hooks.slack.com"),
    ),
    Rule(
        "anthropic-api-key",
        "secret",
        True,
        re.compile(r"\bsk-ant-[a-z0-9]+-[A-Za-z0-9_-]{20,}"),
        hint=_any_of("sk-ant-"),
    ),
    Rule(
        "openai-api-key",
        "secret",
        True,
        re.compile(r"\bsk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
        hint=_any_of("sk-"),
    ),
    Rule(
        "google-api-key",
        "secret",
        True,
        re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"),
        hint=_any_of("AIza"),
    ),
    Rule(
        "stripe-live-key",
        "secret",
        True,
        re.compile(r"\b[rs]k_live_[0-9A-Za-z]{24,}\b"),
        hint=_any_of("k_live_"),
    ),
    Rule(
        "jwt",
        "secret",
        True,
        re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
        hint=_any_of("eyJ"),
    ),
)

PII_RULES: tuple[Rule, ...] = (
    Rule(
        "card-number",
        "pii",
        False,
        re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)"),
        check=_luhn,
        hint=_run_of(" -", 13),
    ),
    Rule(
        "email",
        "pii",
        False,
        re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b"),
        hint=_any_of("@"),
    ),
    Rule(
        "phone-number",
        "pii",
        False,
        re.compile(
            r"(?<![\w+])(?<!\d[ .-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)[ .-]?|\d{2,4}[ .-])"
            r"\d{3,4}[ .-]\d{3,4}(?!\d|[ .-]\d)"
        ),
        hint=_run_of(" .()+-", 10),
    ),
)


class DefaultScanner:
    """Blocks private keys and cloud/API key shapes; reports emails, phone numbers and
    Luhn-valid card numbers without blocking.

    Args:
        block_pii: also refuse writes that contain personal data.
        extra_rules: more rules, checked after the built-in ones.
    """

    def __init__(self, *, block_pii: bool = False, extra_rules: Sequence[Rule] = ()) -> None:
        pii = tuple(Rule(r.name, r.kind, block_pii, r.pattern, r.check, r.hint) for r in PII_RULES)
        self.rules: tuple[Rule, ...] = SECRET_RULES + pii + tuple(extra_rules)

    def scan(self, path: str, content: bytes) -> Sequence[Finding]:
        text = content.decode("utf-8", errors="replace")
        findings: list[Finding] = []
        spans: list[tuple[int, int]] = []
        for rule in self.rules:
            if rule.hint is not None and not rule.hint(text):
                continue
            for match in rule.pattern.finditer(text):
                value = match.group(0)
                if rule.check is not None and not rule.check(value):
                    continue
                start, end = match.span()
                if rule.kind == "pii" and any(s < end and start < e for s, e in spans):
                    continue  # part of something already reported
                spans.append((start, end))
                findings.append(
                    Finding(
                        rule=rule.name,
                        kind=rule.kind,
                        blocking=rule.blocking,
                        path=path,
                        line=text.count("\n", 0, start) + 1,
                        excerpt=_mask(value, rule.kind),
                    )
                )
        return findings


class NoScanner:
    """Accepts everything: for stores whose content is trusted by construction."""

    def scan(self, path: str, content: bytes) -> Sequence[Finding]:
        return ()


#: Bytes before a change that are scanned with it, so that a secret split across the
#: seam (one half already stored, the other half added now) is still seen whole.
SEAM_OVERLAP = 1024


def scan_added(scanner: Scanner, path: str, before: bytes, added: bytes) -> list[Finding]:
    """Findings in ``added`` as it lands after ``before`` (the stored bytes just ahead
    of it; only the last :data:`SEAM_OVERLAP` of them matter).

    The scan sees the overlap and the new bytes together and reports what was not
    already there: a finding lying wholly in the old bytes does not block every later
    append, and one that only the joined text shows does. Line numbers count from the
    start of ``added``.
    """
    if not before:
        return list(scanner.scan(path, added))
    tail = before[-SEAM_OVERLAP:]
    if len(before) > SEAM_OVERLAP:
        cut = tail.find(b"\n")
        tail = tail[cut + 1 :] if 0 <= cut < len(tail) - 1 else tail
    shift = tail.count(b"\n")
    joined = scanner.scan(path, tail + added)
    old: dict[tuple[str, int, str], int] = {}
    if joined:  # only then is it worth knowing what the old bytes alone contain
        for f in scanner.scan(path, tail):
            old[(f.rule, f.line, f.excerpt)] = old.get((f.rule, f.line, f.excerpt), 0) + 1
    found: list[Finding] = []
    for f in joined:
        key = (f.rule, f.line, f.excerpt)
        if old.get(key):
            old[key] -= 1
            continue
        found.append(f.model_copy(update={"line": max(1, f.line - shift)}))
    return found
