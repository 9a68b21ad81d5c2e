"""``anthropic:<model>`` / ``openai:<model>``: an adapter built from the environment.

Keys come from the worker's environment (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``),
never from a workflow input or the history.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from .._agent import Model

PROVIDERS = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}


class ModelSpecError(ValueError):
    """A ``provider:model`` spec that cannot be built (unknown provider, no key)."""


def is_provider_spec(spec: str) -> bool:
    provider, sep, _ = spec.partition(":")
    return bool(sep) and provider in PROVIDERS


def model_from_spec(
    spec: str, *, base_url: str | None = None, environ: Mapping[str, str] | None = None
) -> Model:
    """The adapter for ``anthropic:claude-sonnet-4-6`` or ``openai:gpt-5.5`` (with
    ``base_url`` for an OpenAI-compatible server), its key read from ``environ``."""
    env = os.environ if environ is None else environ
    provider, sep, name = spec.partition(":")
    if not sep or provider not in PROVIDERS or not name:
        raise ModelSpecError(
            f"model {spec!r} is not provider:model; write anthropic:<model> (e.g. "
            "anthropic:claude-sonnet-4-6) or openai:<model> (e.g. openai:gpt-5.5)"
        )
    variable = PROVIDERS[provider]
    key = env.get(variable, "")
    if not key:
        local = " (any value works for a local OpenAI-compatible server)" if base_url else ""
        raise ModelSpecError(
            f"model {spec!r} needs an API key: set {variable} in this process's environment{local}"
        )
    if provider == "anthropic":
        from ._anthropic import AnthropicModel, anthropic_client

        return AnthropicModel(client=anthropic_client(key, base_url), model=name)
    from ._openai import OpenAIModel, openai_client

    return OpenAIModel(client=openai_client(key, base_url), model=name)
