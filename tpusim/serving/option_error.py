"""The errors of serve options, naming the option to blame and the others a message
mentions by their fields of :class:`~tpusim.serving.options.ServeOptions`, so ``tpusim
serve`` can say the flag and a scenario the YAML key and its line: a validation error
of a :data:`Problem` found while the options are checked (:func:`problem_error`,
:func:`located_error`), and :class:`OptionError`, of an option only found bad once the
deployment is loaded (a prompt longer than the model's context, an imbalance above the
expert-parallel degree)."""

from __future__ import annotations

from pydantic import ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from tpusim.errors import InputError

#: A problem: its message and the options it mentions (field names).
Problem = tuple[str, tuple[str, ...]]


def problem_error(problem: Problem) -> PydanticCustomError:
    """A validation error of ``problem``, its mentions in the error's context."""
    message, mentions = problem
    return PydanticCustomError("value_error", message, {"mentions": mentions})


def located_error(field: str, problem: Problem) -> ValidationError:
    """A validation error on ``field`` (so a scenario names that key's line)."""
    detail = InitErrorDetails(type=problem_error(problem), loc=(field,), input=None)
    return ValidationError.from_exception_data("ServeOptions", [detail])


class OptionError(InputError):
    """Bad value of the options ``fields`` (field names; the first is the one to
    blame): ``str()`` is ``"field: problem"`` (``"a + b: problem"`` for several).
    ``mentions``: other options the ``problem`` names (by field name)."""

    def __init__(self, fields: str | tuple[str, ...], problem: str, mentions: tuple[str, ...] = ()):
        self.fields = (fields,) if isinstance(fields, str) else fields
        self.problem, self.mentions = problem, mentions
        super().__init__(f"{' + '.join(self.fields)}: {problem}")
