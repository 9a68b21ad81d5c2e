"""What a run is started with, read so that a start it cannot use fails it.

The SDK decodes a workflow's input before any of its code runs, and an input that does
not validate (``12345``, ``{"task": 5}``, a negative ``turns_per_run``, a dream's input
without ``target``) failed every workflow task after it: the run stayed Running for
ever, its worker logging the same traceback. At run time an agent's input type is
:data:`StartInput`, which takes what validates as an :class:`AgentInput`, a task string
or nothing, in that order, and keeps anything else as :class:`Unreadable`; the loop
fails the run with it, non-retryably and naming the problem. :func:`lenient` reads any
other workflow's input model the same way (``lw.Dreaming``'s). Type checkers see the
plain types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, GetCoreSchemaHandler, ValidationError
from pydantic_core import CoreSchema, core_schema

from .._agent import AgentInput

#: How much of a bad input's validation errors a run's failure quotes.
_PROBLEM_CAP = 600


class Unreadable:
    """A start input that does not validate as the workflow's input model (nor, for an
    agent, as a task string or nothing)."""

    def __init__(self, raw: Any, model: type[BaseModel] = AgentInput) -> None:
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


if TYPE_CHECKING:
    StartInput = AgentInput | str | None
else:
    StartInput = lenient(AgentInput, task=True)
