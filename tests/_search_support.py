"""Reading a ``memory_search`` result the way a model reads it."""

from __future__ import annotations

import re


def ranked(text: str) -> list[str]:
    """The paths of a rendered search result's hits, best first."""
    return re.findall(r"^\d+\. (\S+) \(score", text, flags=re.MULTILINE)
