"""What the memory side reads of a worker's config: ``LwConfig`` sits above the stores
(its activities call them), so they name only what they read of it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from .._callers import CallerCheck
from .._definitions import WorkflowDefinition
from .._ids import DataLayout


class WorkerConfig(Protocol):
    """What the stores read of a worker's ``LwConfig`` (the config sits above the
    stores: its activities call them)."""

    @property
    def layout(self) -> DataLayout: ...

    @property
    def definitions(self) -> Mapping[str, WorkflowDefinition]: ...

    @property
    def callers(self) -> CallerCheck: ...
