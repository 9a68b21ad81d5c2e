"""What an agent run is started with, read so that a start it cannot use fails it.

The SDK decodes a workflow's input before any of its code runs, and an input that does
not validate (``12345``, ``{"task": 5}``, a negative ``turns_per_run``) failed every
workflow task after it: the run stayed Running for ever, its worker logging the same
traceback. At run time the input's type is :data:`StartInput`, which takes what
validates as an :class:`AgentInput`, a task string or nothing, in that order, and keeps
anything else as :class:`Unreadable`; the loop fails the run with it, non-retryably and
naming the problem. Type checkers see the plain union.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import GetCoreSchemaHandler, ValidationError
from pydantic_core import CoreSchema, core_schema

from .._agent import AgentInput

#: How much of a bad input's validation errors a run's failure quotes.
_PROBLEM_CAP = 600


class Unreadable:
    """A start input that is not an :class:`AgentInput`, a task string or nothing."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def problem(self) -> str:
        try:
            AgentInput.model_validate(self.raw)
        except ValidationError as err:
            text = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}"
                for e in err.errors(include_url=False)
            )
            return text[:_PROBLEM_CAP]
        return f"a {type(self.raw).__name__}"


class _Lenient:
    @classmethod
    def __get_pydantic_core_schema__(
        cls, _source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        return core_schema.union_schema(
            [
                handler.generate_schema(AgentInput),
                core_schema.str_schema(),
                core_schema.none_schema(),
                core_schema.no_info_plain_validator_function(Unreadable),
            ],
            mode="left_to_right",
        )


if TYPE_CHECKING:
    StartInput = AgentInput | str | None
else:
    StartInput = _Lenient
