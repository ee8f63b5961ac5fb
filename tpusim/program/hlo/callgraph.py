"""The call graph of an HLO module and the one walk over it that every analysis uses.

:func:`calls` is the only place that knows which attributes name a called computation
(``body=``, ``condition=``, ``branch_computations=``, ``calls=``, ``to_apply=``), what
role the call plays and how many times the callee runs per call (a ``while`` loop's
``known_trip_count``). :func:`walk` visits the instructions reached from a start
computation in program order under a :class:`Policy` (which roles to enter, whether to
unroll loops, whether trip counts multiply), each instruction after the computations it
calls, as a :class:`Site` that knows how many executions it stands for.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Literal, get_args

from tpusim.program.hlo.opcodes import CALL_OPS
from tpusim.program.hlo.parse import Computation, Instruction
from tpusim.program.hlo.syntax import strip_name

#: How a computation is called:
#: ``loop_body``/``loop_condition`` of a ``while`` (run trip-count times);
#: ``branch``: the first branch of a ``conditional`` (the one taken to run),
#: ``other_branch``: the others; ``call``: a ``call``; ``fused``: a ``fusion``'s body;
#: ``async``: the computation an ``async-start`` runs; ``custom``: a ``custom-call``'s;
#: ``applied``: the per-element function of ``reduce``, ``all-reduce``, ``sort``, ...
CallRole = Literal[
    "loop_body",
    "loop_condition",
    "branch",
    "other_branch",
    "call",
    "fused",
    "async",
    "custom",
    "applied",
]
_ROLE_OF_CALL_OP: dict[str, CallRole] = {
    "fusion": "fused",
    "call": "call",
    "async-start": "async",
    "custom-call": "custom",
}
_TRIP_COUNT_RE = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"(\d+)"')


@dataclass(frozen=True)
class Call:
    """``callee`` runs ``num_runs`` times per execution of the calling instruction."""

    callee: str
    role: CallRole
    num_runs: int = 1


def trip_count(ins: Instruction) -> int:
    """A ``while``'s ``backend_config`` ``"known_trip_count":{"n":"10"}``; 1 when absent."""
    m = _TRIP_COUNT_RE.search(ins.attrs.get("backend_config", ""))
    return int(m.group(1)) if m else 1


def called_names(ins: Instruction, keys: tuple[str, ...]) -> list[str]:
    """Computation names in the attributes ``keys`` (``{%a, %b}`` lists or one name)."""
    out = []
    for key in keys:
        if key in ins.attrs:
            out += [strip_name(x) for x in ins.attrs[key].strip("{}").split(",") if x.strip()]
    return out


def calls(ins: Instruction) -> tuple[Call, ...]:
    """Every computation ``ins`` calls, with its role and runs per execution of ``ins``."""
    if ins.opcode == "while":
        trips = trip_count(ins)
        body = [Call(c, "loop_body", trips) for c in called_names(ins, ("body",))]
        return (
            *body,
            *(Call(c, "loop_condition", trips) for c in called_names(ins, ("condition",))),
        )
    if ins.opcode == "conditional":
        keys = ("branch_computations", "true_computation", "false_computation")
        names = called_names(ins, keys)
        return tuple(Call(c, "branch" if i == 0 else "other_branch") for i, c in enumerate(names))
    if "calls" not in ins.attrs and "to_apply" not in ins.attrs:  # most ops: a fast exit
        return ()
    role = _ROLE_OF_CALL_OP.get(ins.opcode, "applied") if ins.opcode in CALL_OPS else "applied"
    return tuple(Call(c, role) for c in called_names(ins, ("calls", "to_apply")))


@dataclass(frozen=True)
class Policy:
    """How a walk runs: the call roles it enters, loop unrolling and trip counting.

    ``unroll_up_to``: a loop of at most this many iterations is walked once per
    iteration (``None``: never); a longer one is walked once standing for all of them.
    ``loop_trip_counts=False`` walks every loop body as if it ran once.
    Site names (:attr:`Site.op_name`) are unique when at most one callee of each call
    site is followed (as the lowering does: loop bodies, not their conditions).
    """

    follow: frozenset[CallRole]
    unroll_up_to: int | None = None
    loop_trip_counts: bool = True


#: Every call: what parse_hlo walks to check the graph has no recursion.
EVERY_CALL = Policy(frozenset(get_args(CallRole)))


@dataclass(frozen=True)
class Frame:
    """One run of a computation during a walk.

    ``prefix`` names it (``""`` at the start, ``"<call site>/"`` for a call,
    ``"<while>/<i>/"`` for an unrolled iteration); ``num_executions`` is how many runs
    of the start's computation it stands for (loop trip counts not unrolled);
    ``caller`` is the call site, ``previous`` the previous unrolled iteration.
    """

    computation: Computation
    prefix: str = ""
    num_executions: int = 1
    role: CallRole | None = None
    caller: Site | None = None
    previous: Frame | None = None
    path: tuple[str, ...] = ()


@dataclass(frozen=True)
class Site:
    """One instruction in one :class:`Frame`; ``runs``: the frames it called, in order."""

    frame: Frame
    instruction: Instruction
    runs: tuple[Frame, ...] = ()

    @property
    def op_name(self) -> str:
        """Unique name of this execution: the frame's prefix + the instruction's name."""
        return self.frame.prefix + self.instruction.name

    @property
    def num_executions(self) -> int:
        return self.frame.num_executions


class RecursiveCallError(ValueError):
    """A computation calls itself (directly or not); ``line`` is the calling instruction's."""

    def __init__(self, ins: Instruction, callee: str) -> None:
        super().__init__(f"'{ins.name}' calls '{callee}', which is already running (recursion)")
        self.line = ins.line


def walk(computations: Mapping[str, Computation], start: str, policy: Policy) -> Iterator[Site]:
    """Every instruction reached from ``start`` under ``policy``, each after its callees.

    Raises :class:`RecursiveCallError` on a call cycle and KeyError on an unknown
    callee (``parse_hlo`` checks both).
    """
    frame = Frame(computations[start], path=(start,))
    yield from _frame_sites(computations, frame, policy)


def _frame_sites(
    computations: Mapping[str, Computation], frame: Frame, policy: Policy
) -> Iterator[Site]:
    for ins in frame.computation.instructions.values():
        site = Site(frame, ins)
        runs: list[Frame] = []
        for call in calls(ins):
            if call.role not in policy.follow:
                continue
            if call.callee in frame.path:
                raise RecursiveCallError(ins, call.callee)
            for run in _runs(computations, site, call, policy):
                yield from _frame_sites(computations, run, policy)
                runs.append(run)
        yield replace(site, runs=tuple(runs)) if runs else site


def _runs(
    computations: Mapping[str, Computation], site: Site, call: Call, policy: Policy
) -> Iterator[Frame]:
    """The frames one call runs: one per unrolled iteration, else one for all of them."""
    callee = computations[call.callee]
    caller, loop = site.frame, call.role in ("loop_body", "loop_condition")
    path = (*caller.path, call.callee)
    base = Frame(callee, f"{site.op_name}/", caller.num_executions, call.role, site, None, path)
    if not loop:
        yield base
    elif policy.unroll_up_to is not None and call.num_runs <= policy.unroll_up_to:
        previous = None
        for i in range(call.num_runs):
            previous = replace(base, prefix=f"{site.op_name}/{i}/", previous=previous)
            yield previous
    else:
        trips = call.num_runs if policy.loop_trip_counts else 1
        yield replace(base, num_executions=caller.num_executions * trips)
