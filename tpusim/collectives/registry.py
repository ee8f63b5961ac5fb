"""Collective algorithms by name: one module each, one registration here.

An algorithm is a function ``build(op, size, group) -> pipelines`` (a list of
pipelines, each a list of :class:`~tpusim.collectives.base.Step`; ``direct`` also takes
``pairs=`` for collective-permute) that raises
:class:`~tpusim.collectives.base.AlgorithmError` for an op or group it cannot do.
Each declares the ops and group shapes it supports and its cost class
(:class:`~tpusim.collectives.costs.CostClass`), from which ``auto`` bounds its time
before building it. Adding one is a new module plus one call::

    ALGORITHMS.register("spiral", CollectiveAlgorithm(spiral.build, CostClass(...)))

Schemas (:data:`AlgorithmName`), the CLI's choices and
:func:`~tpusim.collectives.build_schedule` all read this registry; rules about
algorithms ask their entries (``ALGORITHMS.names(where=...)``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
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
from tpusim.collectives.base import Step
from tpusim.collectives.costs import DECLARED, CostClass
from tpusim.registry import Registry
from tpusim.vocabulary import Op

Builder = Callable[..., list[list[Step]]]


@dataclass(frozen=True)
class CollectiveAlgorithm:
    """A registered algorithm: ``build(op, size, group) -> pipelines`` (``direct`` also
    takes ``pairs=``), its declared ops, group shapes and cost class (``cost``; the
    default is every op but permute, any group, one step, the op's generic bytes: loose
    bounds, so ``auto`` always tries it), and ``broadcast_fallback``: whether a
    broadcast it cannot build itself (a ValueError) runs as a scatter from the root
    then its all-gather."""

    build: Builder
    cost: CostClass = field(default_factory=CostClass)
    broadcast_fallback: bool = True

    def supports(self, op: Op) -> bool:
        """Whether the algorithm declares ``op`` (on some group shape)."""
        return op in self.cost.ops


#: Collective algorithms by name (``--algorithm NAME``, ``algorithm: NAME``); the
#: shipped ones are registered below, in one list. Raises UnknownEntryError (a
#: ValueError) naming the choices, DuplicateEntryError for a taken name.
ALGORITHMS: Registry[CollectiveAlgorithm] = Registry("algorithm")


def _known(name: str) -> str:
    if name == "auto":  # cost-based selection (tpusim.collectives.select)
        return name
    ALGORITHMS.get(name)  # UnknownEntryError is a ValueError: pydantic reports it
    return name


#: A schema field holding a registered algorithm name.
AlgorithmName = Annotated[str, AfterValidator(_known)]


def _shipped(
    name: str, module: ModuleType, broadcast_fallback: bool = True
) -> tuple[str, CollectiveAlgorithm]:
    return name, CollectiveAlgorithm(module.build, DECLARED[name], broadcast_fallback)


ALGORITHMS.register_all(
    (
        _shipped("ring", ring),
        _shipped("bidir-ring", bidir_ring),
        _shipped("torus", torus),
        _shipped("halving-doubling", halving_doubling),
        _shipped("direct", direct, broadcast_fallback=False),  # builds every broadcast itself
        _shipped("hierarchical", hierarchical),
        _shipped("recursive-doubling", recursive_doubling),
        _shipped("tree", tree),
        _shipped("direct-axes", direct_axes),
        _shipped("one-shot", one_shot),
    )
)
