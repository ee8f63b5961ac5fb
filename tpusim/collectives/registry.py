"""Collective algorithms by name: one module each, one registration here.

An algorithm is a function ``build(op, size, group) -> pipelines`` (a list of
pipelines, each a list of :class:`~tpusim.collectives.base.Step`; ``direct`` also takes
``pairs=`` for collective-permute) that raises
:class:`~tpusim.collectives.base.AlgorithmError` for an op or group it cannot do.
Each declares the ops and group shapes it supports and its cost class
(:class:`~tpusim.collectives.costs.CostClass`), from which ``auto`` bounds its time
before building it. Adding one is a new module plus one :func:`register_algorithm`
call; schemas
(:data:`AlgorithmName`), the CLI's choices and :func:`~tpusim.collectives.build_schedule`
all read this registry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from pydantic import AfterValidator

from tpusim.collectives import (
    bidir_ring,
    direct,
    direct_axes,
    halving_doubling,
    hierarchical,
    one_shot,
    recursive_doubling,
    ring,
    torus,
    tree,
)
from tpusim.collectives.base import AlgorithmError, Step
from tpusim.collectives.costs import DECLARED, CostClass

Builder = Callable[..., list[list[Step]]]

_ALGORITHMS: dict[str, Builder] = {}
_COSTS: dict[str, CostClass] = {}


def register_algorithm(name: str, build: Builder, cost: CostClass | None = None) -> None:
    """Make ``build`` available as ``--algorithm NAME`` and ``algorithm: NAME``; ``cost``
    declares its ops, group shapes and cost class (default: every op but permute, any
    group, one step, the op's generic bytes: loose bounds, so ``auto`` always tries it).

    Raises ValueError when the name is taken (re-registering the same function is a no-op).
    """
    known = _ALGORITHMS.get(name)
    if known is not None and known is not build:
        raise ValueError(f"collective algorithm '{name}' is already registered")
    _ALGORITHMS[name] = build
    _COSTS[name] = cost or _COSTS.get(name) or CostClass()


def algorithm_cost(name: str) -> CostClass:
    """The declared cost class of ``name``; raises AlgorithmError naming the choices."""
    algorithm_builder(name)
    return _COSTS[name]


def algorithm_names() -> tuple[str, ...]:
    """Registered algorithm names, in registration order (the CLI's choices)."""
    return tuple(_ALGORITHMS)


def algorithm_builder(name: str) -> Builder:
    """The build function of ``name``; raises AlgorithmError naming the choices."""
    try:
        return _ALGORITHMS[name]
    except KeyError:
        choices = ", ".join(_ALGORITHMS)
        raise AlgorithmError(f"unknown algorithm '{name}' (choose from {choices})") from None


def _known(name: str) -> str:
    if name == "auto":  # cost-based selection (tpusim.collectives.select)
        return name
    algorithm_builder(name)  # AlgorithmError is a ValueError: pydantic reports it
    return name


#: A schema field holding a registered algorithm name.
AlgorithmName = Annotated[str, AfterValidator(_known)]

for _name, _module in (
    ("ring", ring),
    ("bidir-ring", bidir_ring),
    ("torus", torus),
    ("halving-doubling", halving_doubling),
    ("direct", direct),
    ("hierarchical", hierarchical),
    ("recursive-doubling", recursive_doubling),
    ("tree", tree),
    ("direct-axes", direct_axes),
    ("one-shot", one_shot),
):
    register_algorithm(_name, _module.build, DECLARED[_name])
