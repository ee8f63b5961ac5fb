"""Device groups of a collective's ``replica_groups=`` attribute, in every form XLA prints.

- explicit ``{{0,1},{2,3}}``;
- iota ``[2,4]<=[8]`` (devices 0..7 in order, cut into 2 groups of 4);
- transposed iota ``[4,2]<=[2,4]T(1,0)`` (the iota reshaped to ``[2,4]``, transposed);
- empty ``{}``: every device (one group of ``num_devices``);
- mesh ``mesh['axis_0'=8,'axis_1'=1] {'axis_0'}``: devices in iota order (or the
  ``<=[dims]T(perm)`` order that may follow the mesh) over the named axes, one group
  per combination of the axes not listed; newer XLA prints the order as a separate
  attribute, ``replica_groups=mesh[...], device_ids=([2,2]T(1,0)) {'axis_0'}``
  (:func:`with_device_ids` joins the two); an axis may be a sub-axis,
  ``{'fsdp':(4)4}`` (Shardy: the part of ``fsdp`` after a major part of 4, of size 4).

Anything else is a ValueError naming the text.
"""

from __future__ import annotations

import itertools
import math
import re

import numpy as np

from tpusim.program.hlo.devices import MAX_DEVICES
from tpusim.program.hlo.syntax import int_list

_IOTA_RE = re.compile(r"\[([\d,\s]+)\]\s*<=\s*\[([\d,\s]+)\](?:\s*T\(([\d,\s]+)\))?")
_MESH_RE = re.compile(
    r"mesh\[([^\]]*)\](?:\s*<=\s*\[([\d,\s]+)\](?:\s*T\(([\d,\s]+)\))?)?\s*\{([^}]*)\}"
)


_DEVICE_IDS_RE = re.compile(r"\(\s*(\[[\d,\s]+\](?:\s*T\([\d,\s]+\))?)\s*\)\s*(\{[^}]*\})")


def with_device_ids(groups: str, device_ids: str) -> str:
    """``mesh[...]`` and ``([dims]T(perm)) {axes}`` as one ``mesh[...] <=[dims]T(perm)
    {axes}``; ValueError naming a ``device_ids`` of another form."""
    found = _DEVICE_IDS_RE.fullmatch(device_ids.strip())
    if found is None or not groups.strip().startswith("mesh["):
        raise ValueError(f"unknown replica group syntax '{groups}, device_ids={device_ids}'")
    return f"{groups.strip()} <={found.group(1)} {found.group(2)}"


def parse_replica_groups(text: str, num_devices: int | None = None) -> list[list[int]]:
    """Device groups of a ``replica_groups=`` value; ValueError naming an unknown form.

    ``{}`` means all devices (needs ``num_devices``; ``[]`` when unknown).
    """
    text = text.strip()
    if re.fullmatch(r"\{\s*\}", text):
        return [list(range(num_devices))] if num_devices else []
    if text.startswith("{"):
        return _explicit(text)
    if m := _IOTA_RE.fullmatch(text):
        return _iota(int_list(m.group(1)), int_list(m.group(2)), m.group(3))
    if m := _MESH_RE.fullmatch(text):
        return _mesh(text, m)
    raise ValueError(f"unknown replica group syntax '{text}'")


def _explicit(text: str) -> list[list[int]]:
    inner = text[1:-1] if text.endswith("}") else None
    if inner is None or re.sub(r"\{[^{}]*\}|[\s,]", "", inner):
        raise ValueError(f"unknown replica group syntax '{text}'")
    return [int_list(g) for g in re.findall(r"\{([^{}]*)\}", inner)]


def _device_count(dims: list[int]) -> int:
    """prod(dims); ValueError past :data:`~tpusim.program.hlo.devices.MAX_DEVICES`,
    before any array of them is built."""
    count = math.prod(dims)
    if count > MAX_DEVICES:
        raise ValueError(f"replica groups over {count} devices (limit {MAX_DEVICES:,})")
    return count


def _iota_ids(dims: list[int], perm: str | None) -> np.ndarray:
    """Device ids 0..prod(dims)-1 reshaped to ``dims`` and transposed by ``T(perm)``."""
    ids = np.arange(_device_count(dims)).reshape(dims)
    if perm and sorted(int_list(perm)) != list(range(len(dims))):
        raise ValueError(f"T({perm}) is no order of the {len(dims)} axes of {dims}")
    return ids.transpose(int_list(perm)) if perm else ids


def _iota(shape: list[int], dims: list[int], perm: str | None) -> list[list[int]]:
    ids = _iota_ids(dims, perm)
    if math.prod(shape) != ids.size:
        raise ValueError(f"iota replica groups {shape} do not hold {ids.size} devices")
    return ids.reshape(shape[0], -1).tolist() if len(shape) > 1 else [ids.ravel().tolist()]


_CHOSEN_RE = re.compile(r"'([^']+)'(?:\s*:\s*\((\d+)\)\s*(\d+))?")


def _mesh(text: str, m: re.Match[str]) -> list[list[int]]:
    axes = re.findall(r"'([^']+)'\s*=\s*(\d+)", m.group(1))
    if not axes:
        raise ValueError(f"unknown replica group syntax '{text}'")
    sizes = {a: int(s) for a, s in axes}
    ids = (
        _iota_ids(int_list(m.group(2)), m.group(3))
        if m.group(2)
        else np.arange(_device_count(list(sizes.values())))
    )
    found = _CHOSEN_RE.findall(m.group(4))
    chosen = [(a, int(pre or 1), int(n) if n else None) for a, pre, n in found]
    if (
        not chosen
        or any(a not in sizes for a, _, _ in chosen)
        or _CHOSEN_RE.sub("", m.group(4)).replace(",", "").strip()
    ):
        raise ValueError(f"unknown replica group syntax '{text}' (axes {m.group(4)!r})")
    cuts = _sub_axis_cuts(text, sizes, chosen)
    dims = [(a, lo, hi) for a, c in cuts.items() for lo, hi in itertools.pairwise(c)]
    ids = ids.reshape([hi // lo for _, lo, hi in dims])
    inside = [
        j
        for a, pre, n in chosen
        for j, (b, lo, _) in enumerate(dims)
        if b == a and pre <= lo < pre * (n or sizes[a] // pre)
    ]
    keep = [j for j in range(len(dims)) if j not in inside]
    size = math.prod(ids.shape[j] for j in inside)
    return ids.transpose(keep + inside).reshape(-1, size).tolist()


def _sub_axis_cuts(
    text: str, sizes: dict[str, int], chosen: list[tuple[str, int, int | None]]
) -> dict[str, list[int]]:
    """Per mesh axis, the pre-sizes where its sub-axes begin (Shardy's ``'x':(pre)size``
    is the part of axis ``x`` of stride ``size(x) / (pre * size)``: ``x`` reshaped to
    ``[pre, size, rest]``, its middle), ending with the axis size; ValueError for a
    sub-axis that does not divide its axis."""
    cuts = {a: {1, n} for a, n in sizes.items()}
    for a, pre, n in chosen:
        end = pre * (n or sizes[a] // pre)
        if sizes[a] % end or end < pre:
            raise ValueError(f"unknown replica group syntax '{text}' (sub-axis of {a!r})")
        cuts[a] |= {pre, end}
    return {a: sorted(c) for a, c in cuts.items()}
