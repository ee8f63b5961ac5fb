"""The error of a serve option that is only found bad once the deployment is loaded
(a prompt longer than the model's context, an imbalance above the expert-parallel
degree): it names the option, and the others its message mentions, by their fields of
:class:`~tpusim.serving.options.ServeOptions`, so ``tpusim serve`` can say the flag
and a scenario the YAML key and its line."""

from __future__ import annotations

from tpusim.errors import InputError


class OptionError(InputError):
    """Bad value of the options ``fields`` (field names; the first is the one to
    blame): ``str()`` is ``"field: problem"`` (``"a + b: problem"`` for several).
    ``mentions``: other options the ``problem`` names (by field name)."""

    def __init__(self, fields: str | tuple[str, ...], problem: str, mentions: tuple[str, ...] = ()):
        self.fields = (fields,) if isinstance(fields, str) else fields
        self.problem, self.mentions = problem, mentions
        super().__init__(f"{' + '.join(self.fields)}: {problem}")
