"""What ``tpusim plan`` is asked (:class:`PlanRequest`) and what it refuses before
searching: numbers out of the shared limits (:func:`request_problem`), a system, a
model fragment, a dtype or a network the search cannot answer (:func:`check_request`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import JsonDict

from tpusim.config.limits import MAX_SHORTLIST, MAX_STEP_TOKENS, MAX_WORKERS
from tpusim.config.loader import load_model
from tpusim.errors import InputError
from tpusim.network import NETWORKS, NetworkSettings, NetworkTree
from tpusim.vocabulary import Dtype

if TYPE_CHECKING:
    from tpusim.config.loader import System

__all__ = [
    "COUNT_FLAG",
    "DEFAULT_CONFIRM",
    "DEFAULT_SHORTLIST",
    "DEFAULT_WORKERS",
    "MAX_PLAN_CHIPS",
    "MAX_PLAN_LAYERS",
    "SCREEN_MARGIN",
    "PlanRequest",
    "check_request",
    "plan_fidelities",
    "request_problem",
]

DEFAULT_SHORTLIST = 4
"""Layouts simulated at the ranking fidelity (after the screen)."""

DEFAULT_WORKERS = 2
"""Worker processes that run the search's memory stage and screen (the parent being
one of them, :mod:`.split`) and its simulations (the machine's two cores)."""

DEFAULT_CONFIRM = 2
"""Layouts (the best by the ranking fidelity) simulated again at the confirming one."""

SCREEN_MARGIN = 0.25
"""Classes whose screened step is more than this fraction above the best screened
step are not simulated (the screen underestimates every layout's step, by a third on
Llama 3.1 405B over the Ironwood pod, but keeps their order there; an assumption
that bounds the simulations)."""

MAX_PLAN_CHIPS = 10_240
"""Most chips a search lays out (a bound defined here, not in config/limits.py): the
largest shipped pod has 9,600; the 134,400-chip Virgo system is planned one pod at a
time (its meshes and routes would take minutes per layout)."""

MAX_PLAN_LAYERS = 1_000
"""Most layers of a fragment or a model a search plans (the largest preset has 126;
the memory model walks every layer of every layout)."""


def plan_fidelities() -> list[str]:
    """The fidelities the search ranks and confirms at: those that simulate whole
    programs (:attr:`~tpusim.network.NetworkBackend.whole_programs`; the packet fidelity
    moves every packet of a whole training step: hours on a pod)."""
    return [name for name, backend in NETWORKS.items() if backend.whole_programs]


#: The flag type of a count the command line reads as a whole number >= 1 (its own
#: message), the request then checking it against the limits (:func:`request_problem`).
COUNT_FLAG: JsonDict = {"flag_type": "positive"}


class PlanRequest(BaseModel):
    """What to plan: a model preset (name or YAML path) on a system (name or path),
    ``global_batch`` sequences of ``seq`` tokens in ``dtype``; ``overrides`` are more
    training_step fields (``layers: 4`` plans a fragment); the search's sizes; the
    networks layouts are ranked and confirmed on. ``tpusim plan``'s flags are generated
    from these fields (:mod:`tpusim.cli.plan`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(
        description="model preset name (tpusim check models) or YAML path",
        json_schema_extra={"positional": True},
    )
    system: str = Field(
        description="shipped system name or path to a system YAML",
        json_schema_extra={"positional": True},
    )
    global_batch: int = Field(description="sequences per step", json_schema_extra=COUNT_FLAG)
    seq: int = Field(description="tokens per sequence", json_schema_extra=COUNT_FLAG)
    dtype: Dtype = Field("bf16", description="the step's dtype")
    overrides: dict[str, Any] = Field(default_factory=dict)
    shortlist: int = Field(
        DEFAULT_SHORTLIST,
        description="layouts ranked by simulation after the screen",
        json_schema_extra=COUNT_FLAG,
    )
    confirm: int = Field(
        DEFAULT_CONFIRM,
        description=f"best ranked layouts simulated again, at most --shortlist (default "
        f"{DEFAULT_CONFIRM} or --shortlist if fewer)",
        json_schema_extra=COUNT_FLAG,
    )
    margin: float | None = SCREEN_MARGIN
    rank_network: NetworkTree = Field(default_factory=lambda: NetworkSettings("analytic"))
    confirm_network: NetworkTree = Field(default_factory=NetworkSettings)
    workers: int = Field(
        DEFAULT_WORKERS,
        description="processes that prune, screen and simulate the layouts",
        json_schema_extra=COUNT_FLAG,
    )
    progress: bool = False

    def __init__(self, *args: object, **fields: object):
        """``PlanRequest(model, system, global_batch, seq, ...)``: the first four fields
        may be given by position."""
        named = ("model", "system", "global_batch", "seq")
        if len(args) > len(named):
            raise TypeError(f"PlanRequest takes at most {len(named)} positional arguments")
        super().__init__(**dict(zip(named, args, strict=False)), **fields)  # type: ignore[arg-type]


def check_request(request: PlanRequest, system: System) -> None:
    """Refuse what the search cannot answer in bounded time or at all (InputError):
    a fidelity not among :func:`plan_fidelities`, more than :data:`MAX_PLAN_CHIPS`
    chips, more layers than the model has or than :data:`MAX_PLAN_LAYERS`, a dtype
    the chip has no peak for."""

    for role, network in (("rank", request.rank_network), ("confirm", request.confirm_network)):
        if not network.backend.whole_programs:
            raise InputError(
                f"{role} fidelity '{network.fidelity}': plan ranks and confirms at "
                f"{' or '.join(plan_fidelities())} (it does not simulate whole training steps)"
            )
    if system.num_chips > MAX_PLAN_CHIPS:
        raise InputError(
            f"{system.name}: {system.num_chips:,} chips; plan searches at most "
            f"{MAX_PLAN_CHIPS:,} (plan one pod of a multi-pod system)"
        )
    peaks = system.chip.peak_flops
    if request.dtype not in peaks:
        raise InputError(
            f"dtype '{request.dtype}': chip {system.chip.name} has no peak FLOP/s for it "
            f"(it has {', '.join(peaks)})"
        )
    layers = request.overrides.get("layers")
    model_layers = load_model(request.model).builder_fields().get("layers", 0)
    if layers is not None and layers > min(model_layers, MAX_PLAN_LAYERS):
        raise InputError(
            f"layers {layers}: {request.model} has {model_layers} layers (a fragment has "
            f"at most that many)"
        )


def request_problem(request: PlanRequest) -> str | None:
    """What is wrong with ``request``'s numbers on their own (None: nothing), by the
    shared limits (:mod:`tpusim.config.limits`)."""

    if request.shortlist < 1 or request.confirm < 1:
        return "shortlist and confirm must be >= 1"
    if request.confirm > request.shortlist:
        return (
            f"confirm {request.confirm} is more than shortlist {request.shortlist}: only "
            "shortlisted layouts are confirmed; raise shortlist or lower confirm"
        )
    if request.shortlist > MAX_SHORTLIST:
        return f"shortlist {request.shortlist:,} is over the limit of {MAX_SHORTLIST:,} simulations"
    if not 1 <= request.workers <= MAX_WORKERS:
        return f"workers must be 1 to {MAX_WORKERS}, got {request.workers:,}"
    tokens = request.global_batch * request.seq
    if tokens > MAX_STEP_TOKENS:
        return (
            f"global batch {request.global_batch:,} x seq {request.seq:,} = {tokens:,} tokens "
            f"per step is over the limit of {MAX_STEP_TOKENS:,}"
        )
    return None
