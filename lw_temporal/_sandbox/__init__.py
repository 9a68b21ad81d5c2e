"""Kernel-enforced sandboxes for one shell command (layer 2 of scoped bash).

The package takes a neutral :class:`SandboxSpec` (mounts with a source folder, a
target path and a mode; cwd; argv; environment; limits; timeout) and knows nothing of
roles, stores or workflows.
"""

from __future__ import annotations

from ._backends import (
    LAUNCH_FAILED_MARKER,
    LAUNCH_FAILED_STATUS,
    Backend,
    BwrapBackend,
    LandlockBackend,
    SandboxUnavailable,
    UnsandboxedBackend,
)
from ._overlay import UpperChange, UpperRefusal, apply_changes, collect_changes
from ._run import OutputSink, RunOutcome, run_sandboxed
from ._spec import DEFAULT_PATH, Limits, MountMode, SandboxMount, SandboxSpec

#: The explicit, loudly named opt-in for running commands without any sandbox.
UNSANDBOXED = "unsandboxed-dangerous"
SANDBOX_CHOICES = ("auto", "bwrap", "landlock", UNSANDBOXED)


def select_backend(choice: str) -> Backend:
    """The backend for a plugin's ``sandbox=`` setting; raises SandboxUnavailable.

    ``auto`` prefers bwrap (a full mount view) and falls back to Landlock where user
    namespaces are blocked; it never falls back to running unsandboxed.
    """
    if choice == "auto":
        reasons = []
        for candidate in (BwrapBackend(), LandlockBackend()):
            try:
                candidate.check()
                return candidate
            except SandboxUnavailable as err:
                reasons.append(f"{candidate.name}: {err}")
        raise SandboxUnavailable("no sandbox backend works here; " + "; ".join(reasons))
    if choice in ("bwrap", "landlock"):
        backend: Backend = BwrapBackend() if choice == "bwrap" else LandlockBackend()
        backend.check()
        return backend
    if choice == UNSANDBOXED:
        return UnsandboxedBackend()
    raise SandboxUnavailable(
        f"unknown sandbox {choice!r}; choose one of {', '.join(SANDBOX_CHOICES)}"
    )


__all__ = [
    "DEFAULT_PATH",
    "LAUNCH_FAILED_MARKER",
    "LAUNCH_FAILED_STATUS",
    "SANDBOX_CHOICES",
    "UNSANDBOXED",
    "Backend",
    "BwrapBackend",
    "LandlockBackend",
    "Limits",
    "MountMode",
    "OutputSink",
    "RunOutcome",
    "SandboxMount",
    "SandboxSpec",
    "SandboxUnavailable",
    "UnsandboxedBackend",
    "UpperChange",
    "UpperRefusal",
    "apply_changes",
    "collect_changes",
    "run_sandboxed",
    "select_backend",
]
