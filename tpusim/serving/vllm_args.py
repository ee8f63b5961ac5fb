"""A recipe's own words as serving options: a ``vllm serve MODEL ...`` line and a
``vllm bench serve ...`` line (the ``vllm`` and ``bench`` options: ``tpusim serve
--vllm "..." --bench "..."``, or the ``serving`` workload's ``vllm:`` and ``bench:``
keys) read into the fields of :class:`~tpusim.serving.options.ServeSpec`.

A native input read at the edge (DESIGN.md): each line is split with :mod:`shlex`;
``--flag value``, ``--flag=value`` and switches are read; :data:`SERVE_FLAGS` and
:data:`BENCH_FLAGS` say which field each modelled flag sets. Every other flag is named
in one warning (never dropped silently); a value that does not parse is a ValueError
naming the flag; a value that contradicts an option given beside it (``--tp 4`` next to
``--tensor-parallel-size 8``) is a ValueError naming both. The model name (a Hugging
Face id) is mapped to a preset by :data:`PRESETS`; another name asks for ``model``.
"""

from __future__ import annotations

import warnings

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from tpusim.config.types import Frozen
from tpusim.serving.vllm_bench_line import BENCH_FLAGS, bench_line
from tpusim.serving.vllm_serve_line import (
    PREFIX_CACHING,
    PRESETS,
    SERVE_FLAGS,
    preset_of,
    serve_line,
)

__all__ = [
    "BENCH_FLAGS",
    "PRESETS",
    "SERVE_FLAGS",
    "RecipeWords",
    "WordsError",
    "bench_line",
    "preset_of",
    "read_words",
    "serve_line",
]


class RecipeWords(Frozen):
    """The ``vllm`` and ``bench`` options: a recipe's command lines, read into the
    other options as they are validated (they are then None)."""

    vllm: str | None = Field(
        None, description='a "vllm serve MODEL ..." line, read into these options'
    )
    bench: str | None = Field(
        None, description='a "vllm bench serve ..." line, read into these options'
    )

    @model_validator(mode="before")
    @classmethod
    def _read_words(cls, data: object) -> object:
        try:
            return read_words(data)
        except WordsError as exc:
            raise PydanticCustomError("value_error", str(exc), {"mentions": exc.mentions}) from None


class WordsError(ValueError):
    """A line that cannot be read; ``mentions``: the options its message names."""

    def __init__(self, message: str, mentions: tuple[str, ...]):
        super().__init__(message)
        self.mentions = mentions


def read_words(data: object) -> object:
    """``data`` (the options as given) with its ``vllm`` and ``bench`` lines read into
    fields: a field given beside them must agree. Warns once naming every flag not
    modelled. Raises ValueError (the flag, or both options, named)."""
    if not isinstance(data, dict) or not (data.get("vllm") or data.get("bench")):
        return data
    out = {k: v for k, v in data.items() if k not in ("vllm", "bench")}
    ignored: list[str] = []
    for key, reader in (("vllm", serve_line), ("bench", bench_line)):
        if data.get(key):
            if not isinstance(data[key], str):
                raise WordsError(f"{key}: expected the command line as one string", (key,))
            try:
                values, unmodelled = reader(data[key], "model" in data)
            except ValueError as exc:
                # the key is named as its option unless the message quotes the line,
                # whose own words must not be rewritten as options
                mentions = () if key in str(exc) else (key, "model")
                raise WordsError(f"{key}: {exc}", mentions) from None
            _merge(out, values, key)
            if unmodelled:
                ignored.append(f"{key}: {' '.join(dict.fromkeys(unmodelled))}")
    if not out.pop(PREFIX_CACHING, True):
        if data.get("prefix_tokens"):
            raise WordsError(
                "vllm: --no-enable-prefix-caching contradicts prefix_tokens (a cached prefix)",
                ("vllm", "prefix_tokens"),
            )
        out.pop("prefix_hit_rate", None)  # the prefix is sent, never found in the cache
        out.pop("prefix_tokens", None)
    if ignored:
        warnings.warn(f"not modelled, ignored: {'; '.join(ignored)}", stacklevel=2)
    return out


def _merge(out: dict[str, object], values: dict[str, object], source: str) -> None:
    """Add ``values`` (read from ``source``) to ``out``; raise ValueError on a field
    both give differently."""
    for field, value in values.items():
        if field in out and not _same(out[field], value):
            raise WordsError(
                f"{source} sets {field} to {value!r}, which contradicts {field} {out[field]!r}",
                (source, field),
            )
        out[field] = value


def _same(given: object, read: object) -> bool:
    """Whether an option as given (flags give text) is the value read."""
    if given == read:
        return True
    try:
        return float(str(given)) == float(str(read))
    except ValueError:
        return str(given).lower() == str(read).lower()
