"""Candidate layouts of a training step: mesh role sizes, remat, microbatches.

A layout is a mesh whose axes are named after the roles they play (the registered
parallelism roles, :data:`tpusim.program.builders.roles.ROLES`; an axis named after a
role plays it), written in the order of :func:`searched_roles`, plus the training
step's schedule fields (a remat choice of :data:`REMATS`, the microbatches). The mesh
is laid on the physical axes as the engine lays every mesh
(:func:`tpusim.engine.placement.map_mesh`: mesh axes in order take whole physical
axes or split one, the later axis taking the inner, contiguous piece): each role's
:attr:`~tpusim.program.builders.roles.PlannerCandidates.position` runs from the
outermost role to the innermost, as MaxText orders its mesh (data and pipeline
outside, tensor innermost on neighbouring chips).

Enumeration (bounded): every ordered factorisation of the chip count into the sizes of
the roles the model can use (``expert`` only with experts, ``pipeline`` only with more
than one layer), kept when the mesh fits the topology; with ``d(N)`` divisors of the
chip count and ``r`` roles there are at most ``d(N)^(r-1)`` meshes (9,216 chips, four
roles: 33 divisors, 2,860 ordered factorisations before the topology's cut). Per mesh,
every remat choice, and the microbatch counts :func:`microbatch_choices` gives (at
most :data:`MAX_MICROBATCH_CHOICES`). The builder's own checks
(:func:`~tpusim.program.builders.checks.check_training`) decide the rest.

Growing the search is one registration or one line: a role in the roles registry
(with its planner candidates), a remat policy in :data:`REMATS`, a boolean field in
:data:`FLAGS`. A remat or flag entry whose workload field does not exist is left
out.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from tpusim.program.builders.roles import DATA, PIPELINE, ROLES, TENSOR, Role, roles_that

Fits = Callable[[dict[str, int]], bool]
"""Whether a mesh fits the topology (the caller's cut)."""


@dataclass(frozen=True)
class Remat:
    """A rematerialisation choice: its name in the output and the workload fields
    that select it."""

    name: str
    fields: dict[str, Any] = field(default_factory=dict)


#: Remat choices searched, cheapest in compute first (ties go to the earlier one).
REMATS: tuple[Remat, ...] = (
    Remat("none", {"recompute": False}),
    Remat("full", {"recompute": True}),
    Remat("minimal", {"remat_policy": "minimal"}),
    Remat("save_dot_except_mlp", {"remat_policy": "save_dot_except_mlp"}),
)

#: Boolean workload fields searched both ways (each doubles the layouts), when the
#: workload has them.
FLAGS: tuple[str, ...] = ("sequence_parallel", "shard_optimizer_over_data")

MAX_MICROBATCH_CHOICES = 3
"""Most microbatch counts tried per mesh and remat (a bound on the search; with a
pipeline of p stages: p, 2p, 4p; without one: 1, 2, 4 of gradient accumulation)."""


@dataclass(frozen=True)
class Layout:
    """One candidate: ``mesh`` (role-named axes of more than one chip, in
    :func:`searched_roles` order; a one-chip mesh is ``{"data": 1}``), its remat
    choice and microbatches."""

    mesh: dict[str, int]
    remat: Remat
    microbatches: int
    flags: tuple[tuple[str, bool], ...] = ()

    def fields(self) -> dict[str, Any]:
        """The training_step workload fields this layout sets."""
        out = {"mesh": dict(self.mesh), "microbatches": self.microbatches, **self.remat.fields}
        return out | dict(self.flags)

    @property
    def roles(self) -> dict[str, int]:
        """Role -> size for every searched role (1 when absent)."""
        return {role.name: self.mesh.get(role.name, 1) for role in searched_roles()}

    def label(self) -> str:
        """``fsdp 2304 x tensor 4``."""
        return " x ".join(f"{name} {size}" for name, size in self.mesh.items())


def divisors(n: int) -> list[int]:
    """The divisors of ``n`` >= 1, ascending (trial division up to the square root: a
    prime batch of 10^9 sequences takes milliseconds, not a scan of 10^9 numbers)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def factorisations(n: int, parts: int) -> Iterator[tuple[int, ...]]:
    """Every ordered tuple of ``parts`` positive integers whose product is ``n``."""
    if parts == 1:
        yield (n,)
        return
    for d in divisors(n):
        for rest in factorisations(n // d, parts - 1):
            yield (d, *rest)


def searched_roles() -> list[Role]:
    """The registered roles, outermost first (by their planner position)."""
    return sorted((role for _, role in ROLES.items()), key=lambda r: r.planner.position)


def active_roles(model: Mapping[str, object]) -> list[Role]:
    """The searched roles this model can use: the role's ``needs`` field is non-zero
    (``layers`` needs more than one layer for a pipeline) and its ``seq`` is at least
    the role's ``min_seq``."""
    out = []
    for role in searched_roles():
        need = role.planner.needs
        value = _int(model.get(need, 0)) if need else 1
        if need == "layers":
            value = int(value > 1)
        if value and _int(model.get("seq", 0)) >= role.planner.min_seq:
            out.append(role)
    return out


def _int(value: object) -> int:
    """A model field as a count (None: 0)."""
    return int(value) if isinstance(value, int | float) else 0


def remat_choices(known_fields: set[str]) -> list[Remat]:
    """The remat choices whose fields the workload has."""
    return [r for r in REMATS if set(r.fields) <= known_fields]


def flag_choices(known_fields: set[str]) -> list[tuple[tuple[str, bool], ...]]:
    """Every setting of the :data:`FLAGS` the workload has (one empty one if none)."""
    flags = [f for f in FLAGS if f in known_fields]
    return [
        tuple(zip(flags, values, strict=True))
        for values in itertools.product((False, True), repeat=len(flags))
    ]


def meshes(num_chips: int, roles: list[Role], fits: Fits) -> Iterator[dict[str, int]]:
    """Role-named meshes of ``num_chips`` chips over ``roles`` that ``fits(mesh)``
    accepts (the topology's cut), each once, axes of one chip left out."""
    for sizes in factorisations(num_chips, len(roles)):
        mesh = {r.name: s for r, s in zip(roles, sizes, strict=True) if s > 1}
        mesh = mesh or {DATA.name: 1}
        if fits(mesh):
            yield mesh


def microbatch_choices(per_shard: int, stages: int) -> list[int]:
    """Microbatch counts for ``per_shard`` sequences per batch shard: ``k * stages``
    for k = 1, 2, 4 (at least one per stage keeps a pipeline busy; 1, 2, 4 without
    one) that divide ``per_shard``, at most :data:`MAX_MICROBATCH_CHOICES`; when none
    divides, the largest divisor of ``per_shard`` (a pipeline then runs with a
    bubble)."""
    wanted = [k * stages for k in (1, 2, 4)][:MAX_MICROBATCH_CHOICES]
    picked = [m for m in wanted if per_shard % m == 0]
    if picked:
        return picked
    return [max(d for d in divisors(per_shard) if d <= stages)]


def layouts(
    num_chips: int,
    global_batch: int,
    model: Mapping[str, object],
    known_fields: set[str],
    fits: Fits,
) -> Iterator[Layout]:
    """Every candidate layout (see the module docstring): meshes that ``fits`` accepts
    whose batch axes (the roles that shard the batch) divide ``global_batch``, each
    remat choice and microbatch count."""
    remats = remat_choices(known_fields)
    flags = flag_choices(known_fields)
    for mesh in meshes(num_chips, active_roles(model), fits):
        shards = math.prod(mesh.get(role.name, 1) for role in roles_that("batch"))
        if global_batch % shards:
            continue
        per_shard = global_batch // shards
        choices = microbatch_choices(per_shard, mesh.get(PIPELINE.name, 1))
        for remat, m, flag in itertools.product(remats, choices, flags):
            if all(on is False or _applies(name, mesh) for name, on in flag):
                yield Layout(mesh, remat, m, flag)


def _applies(flag: str, mesh: dict[str, int]) -> bool:
    """Whether turning ``flag`` on changes anything on ``mesh``: sequence parallelism
    needs a tensor axis, ZeRO-1 a data axis (else the layout is its flag-off twin)."""
    axis = {"sequence_parallel": TENSOR.name, "shard_optimizer_over_data": DATA.name}.get(flag)
    return axis is None or mesh.get(axis, 1) > 1
