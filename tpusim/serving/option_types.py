"""The value types of the serving options (:mod:`tpusim.serving.options`): a
prefill/decode split written ``P:D``, a request rate that may be ``inf``, a token
count as given, and the limit on an open loop's span.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, Field, JsonValue, PlainSerializer, PositiveInt

__all__ = [
    "MAX_SPLIT_REPLICAS",
    "TOKENS_HELP",
    "Rate",
    "Split",
    "TokenCountValue",
    "parse_split",
    "within",
]

#: Largest prefill or decode replica count of a split (a limit, far above any pod).
MAX_SPLIT_REPLICAS = 2**20
#: What a token count may be (the help of prompt_tokens and output_tokens).
TOKENS_HELP = (
    "a whole number or YAML: '{uniform: [LO, HI]}', '{lognormal: {median: M, sigma: S}}', "
    "'{random: {length: L, range_ratio: R}}' (vLLM's random dataset), '{sharegpt: prompt}'"
)


def parse_split(value: object) -> object:
    """``P:D`` text as (prefill, decode) replicas, whole numbers >= 1 (a pair passes
    through). Raises ValueError."""
    if not isinstance(value, str):
        return value
    parts = value.split(":")
    if len(parts) != 2 or not all(p.isdigit() and 1 <= int(p) <= MAX_SPLIT_REPLICAS for p in parts):
        raise ValueError(f"expected P:D, whole numbers >= 1, got {value!r}")
    return int(parts[0]), int(parts[1])


#: Prefill and decode replicas, written ``P:D``.
Split = Annotated[
    tuple[PositiveInt, PositiveInt],
    BeforeValidator(parse_split),
    PlainSerializer(lambda pair: f"{pair[0]}:{pair[1]}", return_type=str),
]
#: A request rate (requests/s): finite > 0, or ``.inf`` (every request at once).
Rate = Annotated[float, Field(allow_inf_nan=True)]
#: A share of a whole, above 0 and at most 1 (vLLM's --gpu-memory-utilization).
Share = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
#: A token count as given: a whole number, or a distribution as a mapping or YAML text
#: (see :mod:`tpusim.serving.requests`).
TokenCountValue = int | str | dict[str, JsonValue]


def within(value: float, lo: float, hi: float) -> float:
    """``value`` if ``lo <= value <= hi``; raises ValueError saying the range."""
    if not lo <= value <= hi:
        raise ValueError(f"must be {lo:g} to {hi:g}, got {value:g}")
    return value
