"""Which host ids a root worker may lease to agents and stores, and how a range splits.

The first id of a range is the group every agent shares; the lower half of the others
goes to agents (one uid and gid per run), the upper half to memory stores (one group
per store root), so that no agent's own uid or gid is ever a store's group. Every
worker of one data dir must use the same range (:mod:`._leases` records it).
"""

from __future__ import annotations

from pathlib import Path

#: The default range: ids no account, system service or container range on a
#: systemd host uses (systemd's "unused" 0x70000000-0x7FFFFFFF).
DEFAULT_IDS = range(0x70000000, 0x70000000 + 16384)


def _extents(name: str) -> list[tuple[int, int]]:
    """[first, end) of each id range this process's user namespace maps."""
    found = []
    try:
        for line in Path(f"/proc/self/{name}").read_text().splitlines():
            inside, _, count = (int(x) for x in line.split())
            found.append((inside, inside + count))
    except (OSError, ValueError):
        return [(0, 1 << 32)]
    return found


def unmapped(ids: range) -> str | None:
    """Why the ids cannot be switched to here (outside this user namespace's maps: a
    rootless container's root maps only a few), else ``None``."""
    for name in ("uid_map", "gid_map"):
        if not any(a <= ids[0] and ids[-1] < b for a, b in _extents(name)):
            return (
                f"sandbox_ids {ids!r} are not all mapped in this worker's user namespace "
                f"(/proc/self/{name}); give BashOptions(sandbox_ids=...) a range inside it"
            )
    return None


def default_ids() -> range:
    """:data:`DEFAULT_IDS` where this user namespace maps them, else the same count at
    the top of its largest mapped range, below the overflow ids (65534 and up)."""
    if unmapped(DEFAULT_IDS) is None:
        return DEFAULT_IDS
    first, end = max(_extents("uid_map"), key=lambda e: e[1] - e[0])
    end = min(end, 65534) if first < 65534 else end
    count = min(len(DEFAULT_IDS), end - max(first, 1000))
    if count < 3:
        return DEFAULT_IDS  # nothing to lease here: said at worker start (unmapped)
    return range(end - count, end)


def check_ids(ids: range) -> range:
    """``ids`` if it can be a pool (raises ``ValueError`` saying what is wrong)."""
    if ids.step != 1 or len(ids) < 3:
        raise ValueError(
            f"sandbox_ids={ids!r}: give a range of at least 3 consecutive ids (the "
            "first is the agents' shared group; half the others go to agents, half to "
            "memory stores)"
        )
    if ids[0] <= 0 or ids[-1] >= 0xFFFFFFFF or 65534 in ids:
        raise ValueError(
            f"sandbox_ids={ids!r}: ids must be above 0 (root), below 4294967295 and "
            "must not hold 65534 (nobody)"
        )
    return ids


def split_ids(ids: range) -> tuple[range, range]:
    """The agents' numbers and the stores' numbers of a checked range."""
    numbers = ids[1:]
    half = len(numbers) // 2
    return numbers[:half], numbers[half:]
