"""Parallelism roles: what a mesh axis does in a training step (:data:`ROLES`).

A training step's mesh axes play roles. A mesh axis named after a role plays it
(``mesh: {data: 72, pipeline: 16, tensor: 8}``); the role's axis field
(``<role>_axis``, :attr:`Role.field`) names another axis for it and overrides.

Each role declares, as data the builders, the planner and the tests read:

* its **semantics** (one line) and what its axis **shards** (:data:`SHARDS`): the
  batch, each sequence, every weight (FSDP-style, gathered before use), the weight
  matrices and heads (tensor-style, never gathered), the routed experts, the layers;
* the **collectives** it adds to a training step (the ops whose group spans its
  axis, with the layout flags off and no vocabulary);
* its **memory** effect: the per-chip quantities its axis shrinks (:data:`MEMORY`:
  the ``weights`` a chip holds, the ``activations`` one layer saves);
* its **planner** candidates (:class:`PlannerCandidates`): where it sits in a
  searched mesh (outermost first), the model field it needs, the shortest sequence
  it is tried at, and whether its split of the batch with the other such roles is
  left free by the screen;
* the roles whose axis it may **share** (experts over the data or fsdp replicas);
* its **axis field** ``<role>_axis`` (:attr:`Role.field`), which every step model
  takes from the registration (:class:`~.fields.RoleAxes`), with the role's
  ``default_axis`` (None: the mesh axis of the role's name, when no other role names
  it; ``data`` plays the ``data`` axis even then);
* its **purpose** in the exposed/hidden breakdown of a step's communication: the
  builder marks each collective with the role that issued it (:attr:`Op.role
  <tpusim.program.ir.Op>`), and :mod:`tpusim.results.overlap` reports one pair of
  columns per registered role.

The training step computes its groups from these declarations (the batch axes are
the roles that shard the batch, the FSDP group those that shard every weight, ...),
so a role whose effect is a combination of them is one :meth:`Registry.register`
call (``tests/test_extend_role.py`` adds one from the test file). A role with a new
kind of effect also needs the builder code for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from tpusim.registry import Registry

__all__ = [
    "CONTEXT",
    "DATA",
    "EXPERT",
    "FSDP",
    "MEMORY",
    "PIPELINE",
    "ROLES",
    "SHARDS",
    "TENSOR",
    "PlannerCandidates",
    "Role",
    "issuer",
    "role_fields",
    "roles_that",
]

Shard = Literal["batch", "sequence", "weights", "matrices", "experts", "layers"]
#: What a role's axis may shard (see the module docstring).
SHARDS: tuple[Shard, ...] = ("batch", "sequence", "weights", "matrices", "experts", "layers")

Memory = Literal["weights", "activations"]
#: Per-chip quantities a role's axis may shrink.
MEMORY: tuple[Memory, ...] = ("weights", "activations")

Collective = Literal[
    "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute"
]


@dataclass(frozen=True)
class PlannerCandidates:
    """How ``tpusim plan`` searches a role: ``position`` in the mesh (outermost
    first, MaxText's order: data and pipeline outside, tensor innermost), the model
    field that must be non-zero for the role to apply (``layers``: more than one),
    the shortest ``seq`` it is tried at, and ``free_split``: the screen tells this
    role's share of the batch from the other ``free_split`` roles' apart only by
    asynchronous communication, so one split of each class is simulated."""

    position: float
    needs: str | None = None
    min_seq: int = 0
    free_split: bool = False


@dataclass(frozen=True)
class Role:
    """One parallelism role (see the module docstring)."""

    name: str
    semantics: str
    shards: frozenset[Shard]
    collectives: frozenset[Collective]
    memory: frozenset[Memory]
    planner: PlannerCandidates
    may_share: tuple[str, ...] = ()
    default_axis: str | None = None

    @property
    def field(self) -> str:
        """The training step's field that names this role's axis: ``<name>_axis``."""
        return f"{self.name}_axis"

    def does(self, shard: Shard) -> bool:
        """Whether this role's axis shards ``shard``."""
        return shard in self.shards


ROLES: Registry[Role] = Registry("parallelism role")
"""Every parallelism role, in the order their axes are looked up and checked."""

CONTEXT_MIN_SEQ = 32768
"""Shortest sequence for which the planner tries context parallelism (an assumption:
the public MaxText recipes shard the sequence only for long-context runs, 131k tokens
on Ironwood; at 8k the batch axes have work to split). It keeps the search bounded:
each role multiplies the meshes by up to the chip count's divisors."""

DATA = ROLES.register(
    "data",
    Role(
        "data",
        "replicas of the model, each on its own share of the batch",
        frozenset({"batch"}),
        frozenset({"all-reduce"}),
        frozenset({"activations"}),
        PlannerCandidates(0, free_split=True),
        default_axis="data",
    ),
)
FSDP = ROLES.register(
    "fsdp",
    Role(
        "fsdp",
        "shards of the batch whose weights, gradients and optimiser state are sharded "
        "too: each layer's weights all-gathered before use, its gradients reduce-scattered",
        frozenset({"batch", "weights"}),
        frozenset({"all-gather", "reduce-scatter"}),
        frozenset({"weights", "activations"}),
        PlannerCandidates(2, free_split=True),
    ),
)
TENSOR = ROLES.register(
    "tensor",
    Role(
        "tensor",
        "the heads and the MLP width split (Megatron): activations all-reduced after "
        "the attention and the MLP",
        frozenset({"matrices"}),
        frozenset({"all-reduce"}),
        frozenset({"weights", "activations"}),
        PlannerCandidates(5),
    ),
)
EXPERT = ROLES.register(
    "expert",
    Role(
        "expert",
        "routed experts split over the axis, tokens sent to them and back by all-to-all; "
        "the axis shards the batch too",
        frozenset({"batch", "experts"}),
        frozenset({"all-to-all", "all-reduce"}),
        frozenset({"weights", "activations"}),
        PlannerCandidates(4, needs="experts"),
        may_share=("data", "fsdp"),
    ),
)
PIPELINE = ROLES.register(
    "pipeline",
    Role(
        "pipeline",
        "consecutive layers on consecutive stages, microbatches passed on by permutes",
        frozenset({"layers"}),
        frozenset({"collective-permute"}),
        frozenset({"weights"}),
        PlannerCandidates(1, needs="layers"),
    ),
)
CONTEXT = ROLES.register(
    "context",
    Role(
        "context",
        "each sequence split (load-balanced causal attention over the gathered keys and "
        "values); weights sharded over it as over fsdp",
        frozenset({"sequence", "weights"}),
        frozenset({"all-gather", "reduce-scatter"}),
        frozenset({"weights", "activations"}),
        PlannerCandidates(3, min_seq=CONTEXT_MIN_SEQ),
    ),
)


def roles_that(shard: Shard) -> tuple[Role, ...]:
    """The registered roles whose axis shards ``shard``, in registration order."""
    return tuple(role for _, role in ROLES.items() if role.does(shard))


def issuer(
    shards: tuple[Shard, ...], group: tuple[str, ...], axes: Mapping[str, str | None]
) -> str:
    """The role that issues a collective over mesh axes ``group`` whose axes shard one
    of ``shards`` (``axes``: ``<role>_axis`` -> axis, as :func:`~.mesh.role_axes`
    resolves them): the first registered role that shards one of ``shards`` and plays
    an axis of ``group``.

    A group over axes of several such roles (the gradient all-reduce over the data and
    expert axes, the weight gather over the fsdp and context axes) is the first one's:
    one purpose per collective, so the purposes sum as the collective kinds do."""
    for _, role in ROLES.items():
        if role.shards.intersection(shards) and axes.get(role.field) in group:
            return role.name
    raise ValueError(f"no role that shards {' or '.join(shards)} plays an axis of {group}")


def role_fields() -> tuple[str, ...]:
    """Every registered role's axis field (``data_axis``, ...), in registration order."""
    return tuple(role.field for _, role in ROLES.items())
