"""Model adapters for real LLMs, on the providers' official SDKs.

``AnthropicModel(client=anthropic.AsyncAnthropic(), model="claude-sonnet-4-6")`` and
``OpenAIModel(client=openai.AsyncOpenAI(), model="gpt-5.5")`` (Chat Completions, so any
OpenAI-compatible server works through ``base_url``: vLLM, Ollama, LiteLLM). Each
speaks its provider's native tool protocol, reports token usage, and turns provider
errors into typed ``ApplicationError``s (rate limits and overload retried after the
provider's ``retry-after``; bad keys, bad requests and context overflow not retried).
The SDKs are optional extras (``pip install 'lw-temporal[anthropic]'`` or
``[openai]``); each adapter imports its SDK only when it is first used.

``OpenAIEmbedder(client=openai.AsyncOpenAI())`` turns texts into vectors so that
``memory_search`` ranks by meaning too (``MemoryOptions(embedder=...)``); Anthropic has
no embeddings endpoint.

Constants: the ``ApplicationError`` types an adapter raises, also in
``lw_temporal.errors``: ``MODEL_AUTH``, ``MODEL_INVALID_REQUEST``,
``MODEL_CONTEXT_OVERFLOW`` and ``MODEL_REFUSED`` are not retried; ``MODEL_RATE_LIMITED``
and ``MODEL_UNAVAILABLE`` are, after the provider's ``retry-after``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._agent import Model, ModelRequest, ModelResponse, ToolCall, ToolResult, ToolSpec, Usage
from ._errors import (
    MODEL_AUTH,
    MODEL_CONTEXT_OVERFLOW,
    MODEL_INVALID_REQUEST,
    MODEL_RATE_LIMITED,
    MODEL_REFUSED,
    MODEL_UNAVAILABLE,
)
from ._spec import ModelSpecError, model_from_spec

if TYPE_CHECKING:
    from ._anthropic import AnthropicModel
    from ._openai import OpenAIModel
    from ._openai_embeddings import OpenAIEmbedder

__all__ = [
    "MODEL_AUTH",
    "MODEL_CONTEXT_OVERFLOW",
    "MODEL_INVALID_REQUEST",
    "MODEL_RATE_LIMITED",
    "MODEL_REFUSED",
    "MODEL_UNAVAILABLE",
    "AnthropicModel",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ModelSpecError",
    "OpenAIEmbedder",
    "OpenAIModel",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "Usage",
    "model_from_spec",
]


def __getattr__(name: str) -> Any:
    # Import an SDK only when its adapter is asked for: each is an optional extra.
    if name == "AnthropicModel":
        from ._anthropic import AnthropicModel

        return AnthropicModel
    if name == "OpenAIModel":
        from ._openai import OpenAIModel

        return OpenAIModel
    if name == "OpenAIEmbedder":
        from ._openai_embeddings import OpenAIEmbedder

        return OpenAIEmbedder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
