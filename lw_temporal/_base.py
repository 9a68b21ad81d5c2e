"""The one base of the package's requests, results and records.

Frozen because these values cross Temporal (workflow inputs, activity arguments and
results) and are compared and hashed; a value that changed after it was sent would
make replay see something other than what the history holds. The SDK decodes a
workflow's input (and an update's argument) before any of its code runs, so one that
does not validate failed every workflow task after it; :func:`lenient` reads it so that
the workflow can refuse it, once, saying why. Extra fields are refused
so that a misspelt field name fails where it is written instead of being dropped.

Not every model fits: the agent loop's carried state (``_agent._io``) is mutated turn by
turn in workflow code, and the conversation's wire types (``_agent._protocol``) have
their own base that leaves default fields out of the history (``ModelResponse``, which
a user's own ``Model`` builds, ignores fields it does not know).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler, ValidationError
from pydantic_core import CoreSchema, core_schema


class FrozenModel(BaseModel):
    """Immutable, and strict about field names."""

    model_config = ConfigDict(frozen=True, extra="forbid")


#: How much of a bad input's validation errors a run's failure quotes.
_PROBLEM_CAP = 600


class Unreadable:
    """A start input that does not validate as the workflow's input model (nor, for an
    agent, as a task string or nothing)."""

    def __init__(self, raw: Any, model: type[BaseModel]) -> None:
        self.raw = raw
        self.model = model

    def problem(self) -> str:
        try:
            self.model.model_validate(self.raw)
        except ValidationError as err:
            text = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}"
                for e in err.errors(include_url=False)
            )
            return text[:_PROBLEM_CAP]
        return f"a {type(self.raw).__name__}"


def lenient(model: type[BaseModel], *, task: bool = False) -> Any:
    """An annotation that validates as ``model`` (then, with ``task``, as a string or
    ``None``) and keeps anything else as an :class:`Unreadable` for the run to refuse."""

    class _Lenient:
        @classmethod
        def __get_pydantic_core_schema__(
            cls, _source: Any, handler: GetCoreSchemaHandler
        ) -> CoreSchema:
            choices: list[CoreSchema | tuple[CoreSchema, str]] = [handler.generate_schema(model)]
            if task:
                choices += [core_schema.str_schema(), core_schema.none_schema()]
            choices.append(core_schema.no_info_plain_validator_function(
                lambda raw: Unreadable(raw, model)
            ))  # fmt: skip
            return core_schema.union_schema(choices, mode="left_to_right")

    _Lenient.__name__ = _Lenient.__qualname__ = f"Lenient{model.__name__}"
    return _Lenient
