"""Read-only or read-write: the one answer every layer gives about a folder.

A scope mount has a mode, the sandbox binds a folder with one, the bash pre-check asks
which one a command needs of a path and which one the path allows. One enum for all of
them, so a value read from the policy reaches the kernel without a translation table.
"""

from __future__ import annotations

from enum import StrEnum


class Mode(StrEnum):
    """``ro`` or ``rw`` (the values the agent's mount description shows)."""

    RO = "ro"
    RW = "rw"
