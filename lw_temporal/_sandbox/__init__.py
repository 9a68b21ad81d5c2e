"""Kernel-enforced sandboxes for one shell command (layer 2 of scoped bash).

The package takes a neutral :class:`SandboxSpec` (mounts with a source folder, a
target path and a mode; cwd; argv; environment; limits; timeout) and knows nothing of
roles, stores or workflows.
"""

from __future__ import annotations

from .._changes import StoreChange
from ._accounts import Account
from ._backends import Backend, SandboxUnavailable, UnsandboxedBackend
from ._bwrap import BwrapBackend
from ._identity import SandboxUser, secure_data_dir
from ._landlock import LandlockBackend, landlock_abi
from ._leftovers import SweepReport, WorkerClaim, sweep
from ._outcome import RunOutcome
from ._output import OutputSink
from ._overlay import (
    CaptureLimits,
    UpperRefusal,
    apply_changes,
    collect_changes,
    shown_name,
    staging_root,
)
from ._run import run_sandboxed
from ._selftest import self_test
from ._spec import (
    DEFAULT_PATH,
    SYSTEM_VIEW,
    Limits,
    SandboxMount,
    SandboxNetwork,
    SandboxSpec,
    SystemView,
)
from ._staging import StagingPool, forget_staging, make_staging, staging_changed
from ._threadmounts import release_staging
from ._tree import remove_tree
from ._userns import LAUNCH_FAILED_MARKER, LAUNCH_FAILED_STATUS

#: The explicit, loudly named opt-in for running commands without any sandbox.
UNSANDBOXED = "unsandboxed-dangerous"
#: Landlock on a kernel below ABI 6 (no signal scoping): only when asked for by name.
LANDLOCK_LEGACY = "landlock-legacy"
SANDBOX_CHOICES = ("auto", "bwrap", "landlock", LANDLOCK_LEGACY, UNSANDBOXED)


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
    if choice in ("bwrap", "landlock", LANDLOCK_LEGACY):
        backend: Backend = (
            BwrapBackend()
            if choice == "bwrap"
            else LandlockBackend(allow_old_abi=choice == LANDLOCK_LEGACY)
        )
        backend.check()
        return backend
    if choice == UNSANDBOXED:
        return UnsandboxedBackend()
    raise SandboxUnavailable(
        f"unknown sandbox {choice!r}; choose one of {', '.join(SANDBOX_CHOICES)}"
    )


__all__ = [
    "DEFAULT_PATH",
    "LANDLOCK_LEGACY",
    "LAUNCH_FAILED_MARKER",
    "LAUNCH_FAILED_STATUS",
    "SANDBOX_CHOICES",
    "SYSTEM_VIEW",
    "UNSANDBOXED",
    "Account",
    "Backend",
    "BwrapBackend",
    "CaptureLimits",
    "LandlockBackend",
    "Limits",
    "OutputSink",
    "RunOutcome",
    "SandboxMount",
    "SandboxNetwork",
    "SandboxSpec",
    "SandboxUnavailable",
    "SandboxUser",
    "StagingPool",
    "StoreChange",
    "SweepReport",
    "SystemView",
    "UnsandboxedBackend",
    "UpperRefusal",
    "WorkerClaim",
    "apply_changes",
    "collect_changes",
    "forget_staging",
    "landlock_abi",
    "make_staging",
    "release_staging",
    "remove_tree",
    "run_sandboxed",
    "secure_data_dir",
    "select_backend",
    "self_test",
    "shown_name",
    "staging_changed",
    "staging_root",
    "sweep",
]
