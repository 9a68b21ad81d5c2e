"""The host's mount table as a thread that never started a sandbox sees it.

A thread that starts sandboxes with overlays keeps a mount namespace of its own, and
the threads it creates later share it; this module's thread is started when the
module is imported (at collection, before any test runs), so it stays in the host's
namespace for good."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

_HOST_VIEW = ThreadPoolExecutor(1, "host-view")
_HOST_VIEW.submit(int).result()


def host_overlays() -> list[str]:
    """The lw overlay mounts the host's namespace shows."""
    return _HOST_VIEW.submit(_overlays).result()


def _overlays() -> list[str]:
    lines = Path("/proc/thread-self/mountinfo").read_text().splitlines()
    return [line for line in lines if "lw-overlay" in line]
