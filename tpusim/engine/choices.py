"""``auto``'s algorithm choices kept across simulations on one topology.

``auto`` predicts every candidate algorithm of a collective (routing each step of
each candidate, :func:`tpusim.collectives.select.choose`), which can cost more than
the simulation of the chosen one. Simulations of the same system that place the
same collective (op, bytes, the group's chips and axes) under the same network
settings, on-chip model and routing make the same choice, so the first one's answer
(the algorithm's name) is kept per topology and the next ones build that algorithm
directly: the same schedule, the same numbers. Only simulations without faults and
with minimal routing take part (faults re-plan on the surviving links; other routing
draws random routes). The memo dies with its topology.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from tpusim.collectives import AUTO

if TYPE_CHECKING:
    from tpusim.collectives.base import Group
    from tpusim.collectives.offload import OnChipModel
    from tpusim.engine.settings import RunSettings
    from tpusim.program.ir import Op
    from tpusim.topology import Topology

ChoiceKey = tuple[object, ...]

_CHOICES: WeakKeyDictionary[Topology, dict[ChoiceKey, str]] = WeakKeyDictionary()


def choice_key(
    op: Op, group: Group, settings: RunSettings, onchip: OnChipModel
) -> ChoiceKey | None:
    """What ``auto``'s choice for ``op`` on ``group`` depends on beyond the topology;
    None when it is not kept (a named algorithm, faults, routing other than minimal,
    or settings that cannot be a key)."""
    if op.algorithm not in (None, AUTO) or settings.faults is not None:
        return None
    if settings.routing != "minimal":
        return None
    chips = group.chips
    key: ChoiceKey = (op.collective, float(op.size_bytes), chips.shape, chips.dtype.str)
    key += (chips.tobytes(), group.axes, op.pairs, bool(op.split_ports))
    key += (settings.network, onchip)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def known_choice(topology: Topology, key: ChoiceKey | None) -> str | None:
    """The algorithm ``auto`` chose for ``key`` on ``topology`` before (None: not yet)."""
    if key is None:
        return None
    return _CHOICES.get(topology, {}).get(key)


def keep_choice(topology: Topology, key: ChoiceKey | None, algorithm: str) -> None:
    """Remember that ``auto`` chose ``algorithm`` for ``key`` on ``topology``."""
    if key is not None:
        _CHOICES.setdefault(topology, {})[key] = algorithm
