"""The devices an HLO module runs on and the checks on the device ids its collectives name.

A module runs on ``num_partitions`` x ``replica_count`` devices when it declares
either (ids must then be below that count), else on the highest id named + 1. Every
id is >= 0 and below :data:`MAX_DEVICES`; a group names a device once, the groups of
one collective are disjoint and of equal size; a ``collective-permute`` pair is two
ids, and no device sends or receives twice (XLA's HLO verifier rules). Errors are
ValueError naming the problem; the caller adds file and line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

#: Most devices a module may run on (2**20 = 1,048,576): over a hundred times the
#: largest TPU pod (9,216 Ironwood chips), so no real module meets it, and checked
#: before any list of every device is built (assumption; a replay also needs a
#: system with as many chips, which the system's own limits bound).
MAX_DEVICES = 2**20


def declared_devices(attrs: Mapping[str, str]) -> int | None:
    """``num_partitions`` x ``replica_count`` (None when neither is given).

    Raises ValueError if one is not a whole number >= 1 or the product is over
    :data:`MAX_DEVICES`.
    """
    found: int | None = None
    for key in ("num_partitions", "replica_count"):
        if key in attrs:
            value = attrs[key]
            if not re.fullmatch(r"\d{1,19}", value) or int(value) < 1:
                raise ValueError(f"{key}={value[:40]}: expected a whole number >= 1")
            found = (found or 1) * int(value)
    if found is not None and found > MAX_DEVICES:
        raise ValueError(f"the module declares {found} devices (limit {MAX_DEVICES:,})")
    return found


def check_ids(groups: list[list[int]], declared: int | None) -> None:
    """Every id >= 0, below the declared device count and below :data:`MAX_DEVICES`."""
    for group in groups:
        for device in group:
            if device < 0:
                raise ValueError(f"negative device id {device}")
            if declared is not None and device >= declared:
                raise ValueError(
                    f"device id {device} is not below the module's {declared} devices "
                    "(num_partitions x replica_count)"
                )
            if device >= MAX_DEVICES:
                raise ValueError(f"device id {device} is over the limit of {MAX_DEVICES:,}")


def check_groups(groups: list[list[int]]) -> None:
    """Replica groups: none empty, equal sizes, no device twice in one or in two."""
    sizes = sorted({len(g) for g in groups})
    if sizes and sizes[0] == 0:
        raise ValueError("an empty replica group")
    if len(sizes) > 1:
        raise ValueError(f"replica groups of unequal sizes ({', '.join(map(str, sizes))})")
    where: dict[int, int] = {}
    for index, group in enumerate(groups):
        for device in group:
            if device in where:
                place = "twice in one group" if where[device] == index else "in two groups"
                raise ValueError(f"device {device} appears {place}")
            where[device] = index


def check_pairs(pairs: list[list[int]]) -> None:
    """Source-target pairs: two ids each, no device a source twice or a target twice."""
    sources: set[int] = set()
    targets: set[int] = set()
    for pair in pairs:
        if len(pair) != 2:
            raise ValueError(f"source_target_pairs entry {pair} is not a pair")
        source, target = pair
        if source in sources or target in targets:
            role = "source" if source in sources else "target"
            raise ValueError(f"device {pair[role == 'target']} is a {role} twice")
        sources.add(source)
        targets.add(target)
