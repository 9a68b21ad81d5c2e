"""Public suffixes (``com``, ``co.uk``, ``github.io``): where a wildcard may not sit.

``*.co.uk`` would allow every company's domain under ``co.uk``, ``*.github.io`` every
user's site: the names below a public suffix belong to whoever registers them, so a
wildcard must sit on a registrable domain (``*.example.co.uk``). The Public Suffix
List (its ICANN and private sections) comes bundled with ``publicsuffixlist``, read
once, offline. Only the policy model uses this module (the proxy's process, on the
standard library alone, matches the patterns the model has let through).
"""

from __future__ import annotations

import functools

from publicsuffixlist import PublicSuffixList

from ._patterns import HostRule, PatternError


@functools.cache
def _list() -> PublicSuffixList:
    return PublicSuffixList()


def check_wildcard(rule: HostRule) -> None:
    """:class:`PatternError` when ``rule`` is a wildcard over a public suffix."""
    if not rule.wildcard or not _list().is_public(rule.host):
        return
    example = f"*.example.{rule.host}"
    raise PatternError(
        f"{rule.text!r}: {rule.host} is a public suffix (the Public Suffix List), whose "
        "names belong to whoever registers them, so the wildcard would allow all of them; "
        f"name the registrable domain ({example}) or the hosts themselves"
    )
