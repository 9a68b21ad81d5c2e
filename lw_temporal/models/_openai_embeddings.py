"""``OpenAIEmbedder``: vectors for ranking memory by meaning, from OpenAI's embeddings
API through the official ``openai`` SDK.

Anthropic has no embeddings endpoint (its documentation points to third-party
providers such as Voyage AI), so there is no Anthropic embedder; any other provider
fits :class:`lw_temporal.memory.Embedder` in a few lines. An OpenAI-compatible server
(vLLM, Ollama, LiteLLM) serves ``/v1/embeddings`` through the client's ``base_url``.
"""

from __future__ import annotations

from collections.abc import Sequence

import openai

from ._errors import sdk_error
from ._openai import KEY_VARIABLE


class OpenAIEmbedder:
    """Embeddings through ``client.embeddings.create``.

    Args:
        client: an ``openai.AsyncOpenAI`` (``base_url=`` for a compatible server).
        model: the embedding model, e.g. ``"text-embedding-3-small"``.
        dimensions: the vectors' length. ``text-embedding-3`` models shorten their
            vectors on request with little loss; 256 keeps ranking 10,000 chunks by
            meaning in pure Python fast. ``None`` sends none (the model's own size,
            and what servers without the parameter need).
        sdk_retries: retries inside the SDK (a failed call leaves a search ranked
            by words, so a retry or two here is worth it).
    """

    def __init__(
        self,
        client: openai.AsyncOpenAI | None = None,
        model: str = "text-embedding-3-small",
        *,
        dimensions: int | None = 256,
        sdk_retries: int = 2,
    ) -> None:
        base = client if client is not None else openai.AsyncOpenAI()
        self.client = base.with_options(max_retries=sdk_retries)
        self.model = model
        self.dimensions = dimensions

    @property
    def name(self) -> str:
        """The vector space: provider, model and length (vectors of another are
        made again)."""
        return f"openai:{self.model}:{self.dimensions or 'default'}"

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order (as floats: no base64 decoding needed)."""
        try:
            response = await self.client.embeddings.create(
                model=self.model,
                input=list(texts),
                encoding_format="float",
                dimensions=openai.omit if self.dimensions is None else self.dimensions,
            )
        except (openai.APIStatusError, openai.APIConnectionError) as err:
            raise sdk_error(
                err, provider="OpenAI", model=self.model, where="embeddings",
                key_variable=KEY_VARIABLE,
            ) from None  # fmt: skip
        data = sorted(response.data, key=lambda e: e.index)
        if len(data) != len(texts):
            raise ValueError(
                f"OpenAI {self.model!r} returned {len(data)} embeddings for {len(texts)} texts"
            )
        return [list(e.embedding) for e in data]
