"""The option groups of ``LittleWorkflowPlugin``, one per part of the worker.

``LittleWorkflowPlugin(data_dir, definitions, model=..., sandbox=..., tracing=...)`` takes
its everyday settings as keywords; everything else comes in these groups, each left out
keeping its defaults::

    LittleWorkflowPlugin(
        data_dir,
        definitions,
        model=model,
        model_calls=ModelCallOptions(context_budget_tokens=60_000),
        bash=BashOptions(limits=Limits(pids=128)),
        deployment=DeploymentOptions(search_attributes_registered=True),
    )
"""

from .._privacy import FileKeyStore, KeyStore
from .._sandbox import Limits
from ._groups import (
    BashOptions,
    DeploymentOptions,
    DreamingAgentOptions,
    EgressOptions,
    MemoryOptions,
    ModelCallOptions,
    OrchestratorOptions,
    PrivacyOptions,
)

__all__ = [
    "BashOptions",
    "DeploymentOptions",
    "DreamingAgentOptions",
    "EgressOptions",
    "FileKeyStore",
    "KeyStore",
    "Limits",
    "MemoryOptions",
    "ModelCallOptions",
    "OrchestratorOptions",
    "PrivacyOptions",
]
