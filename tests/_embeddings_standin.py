"""A strict stand-in of OpenAI's embeddings API (``POST /v1/embeddings``).

The official SDK client talks to it over ``httpx2.MockTransport`` (no network, no key).
Each request is checked against the SDK's own ``EmbeddingCreateParams``; the answer is
the saved response in ``tests/data/providers/openai_embeddings.json`` (the documented
wire format) with one vector per input, made by a toy model of meaning: words of one
concept (``automobile``, ``car``, ``vehicle``) share a dimension, so two texts that say
the same thing in other words get close vectors, as a real model's would.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai
from openai.types.embedding_create_params import EmbeddingCreateParams

from ._provider_standins import Fault, saved, saved_text, strict

CONCEPTS = (
    {"car", "cars", "automobile", "vehicle", "sedan"},
    {"broken", "faulty", "fails", "malfunctioning", "defective"},
    {"fix", "mend", "repair", "mechanic", "garage"},
    {"invoice", "bill", "payment", "receipt"},
    {"dog", "puppy", "hound"},
)


def meaning(text: str, dimensions: int) -> list[float]:
    """The toy model: a dimension per concept, the rest hashed words (weaker)."""
    vector = [0.0] * dimensions
    for word in re.findall(r"[a-z]+", text.lower()):
        concept = next((i for i, words in enumerate(CONCEPTS) if word in words), None)
        if concept is not None:
            vector[concept] += 1.0
        else:
            bucket = len(CONCEPTS) + int(hashlib.sha256(word.encode()).hexdigest(), 16) % (
                dimensions - len(CONCEPTS)
            )
            vector[bucket] += 0.2
    return vector


@dataclass
class EmbeddingsStandIn:
    faults: dict[int, Fault] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    def client(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            api_key="test-key",
            base_url="http://openai.standin/v1",
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle)),
        )

    async def handle(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        index = len(self.requests)
        self.requests.append(body)
        fault = self.faults.pop(index, None)
        if fault is not None:
            return httpx2.Response(
                fault.status, headers=dict(fault.headers), content=saved_text(fault.body)
            )
        problems = strict(body, EmbeddingCreateParams, "request")
        if request.url.path != "/v1/embeddings":
            problems.append(f"not an embeddings call: {request.url.path}")
        if not request.headers.get("authorization", "").startswith("Bearer "):
            problems.append("no bearer key")
        inputs = body.get("input")
        if (
            not isinstance(inputs, list)
            or not inputs
            or not all(isinstance(t, str) and t for t in inputs)
        ):
            problems.append("input must be a non-empty list of non-empty strings")
        if problems:
            self.violations += problems
            error = saved("openai_error.json")
            error["error"].update(message="; ".join(problems), code="invalid_request", param=None)
            return httpx2.Response(400, json=error)
        answer = copy.deepcopy(saved("openai_embeddings.json"))
        template = answer["data"][0]
        dimensions = int(body.get("dimensions") or 32)
        answer["data"] = [
            {**template, "index": i, "embedding": meaning(text, dimensions)}
            for i, text in enumerate(inputs)
        ]
        answer["model"] = body["model"]
        tokens = sum(len(t.split()) for t in inputs)
        answer["usage"] = {"prompt_tokens": tokens, "total_tokens": tokens}
        return httpx2.Response(200, json=answer)
