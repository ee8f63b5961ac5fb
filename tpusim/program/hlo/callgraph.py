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
#: ``async``: the computation an ``async-start``, ``call-start`` or
#: ``custom-call-start`` runs; ``custom``: a ``custom-call``'s;
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
    "call-start": "async",
    "custom-call": "custom",
}
_TRIP_COUNT_RE = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"(\d+)"')
#: Loops with more iterations become one scaled copy of the body when lowered: past a
#: few hundred copies the op count (and simulation time) grows with no new
#: information per copy (assumption).
MAX_UNROLL = 256
#: Most runs of one instruction (2**63 - 1): XLA keeps a loop's ``known_trip_count``
#: in an int64 (published, XLA ``backend_configs.proto``); past it, nested loops'
#: products are no count XLA could run.
MAX_EXECUTIONS = 2**63 - 1
#: Deepest chain of calls from ENTRY, computations (assumption: compiled modules nest
#: loop, branch, call, fusion and reducer a few levels; deeper text only exhausts
#: the stack of the walk).
MAX_CALL_DEPTH = 64
#: Most instruction runs a walk of the module may visit, loops of up to
#: :data:`MAX_UNROLL` iterations unrolled (assumption: at ~6 us a visit and several
#: walks per replay, a million is about a minute before the engine starts; more is
#: a module that calls computations from many places, nested, and would hang).
MAX_WALK_SITES = 1_000_000


@dataclass(frozen=True)
class Call:
    """``callee`` runs ``num_runs`` times per execution of the calling instruction."""

    callee: str
    role: CallRole
    num_runs: int = 1


def has_trip_count(ins: Instruction) -> bool:
    """Whether a ``while``'s trip count is known (said, or found by :mod:`.loops`)."""
    said = _TRIP_COUNT_RE.search(ins.attrs.get("backend_config", "")) is not None
    return said or ins.inferred_trips is not None


def trip_count(ins: Instruction) -> int:
    """A ``while``'s ``backend_config`` ``"known_trip_count":{"n":"10"}``, else the count
    found from its induction variable (:mod:`.loops`), else 1.

    Raises :class:`CallGraphError` past :data:`MAX_EXECUTIONS`.
    """
    m = _TRIP_COUNT_RE.search(ins.attrs.get("backend_config", ""))
    if not m:
        return 1 if ins.inferred_trips is None else ins.inferred_trips
    if len(m.group(1)) > 19 or int(m.group(1)) > MAX_EXECUTIONS:
        raise CallGraphError(ins, f"has trip count {m.group(1)[:24]} over 2**63-1 (int64)")
    return int(m.group(1))


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
    if ins.opcode == "custom-call-start":  # an async custom call (a SparseCore collective)
        return tuple(Call(c, "async") for c in called_names(ins, ("called_computations",)))
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


class CallGraphError(ValueError):
    """A call graph no walk can run; ``line`` is the offending instruction's."""

    def __init__(self, ins: Instruction, problem: str) -> None:
        super().__init__(f"'{ins.name}' {problem}")
        self.line = ins.line


class RecursiveCallError(CallGraphError):
    """A computation calls itself (directly or not); ``line`` is the calling instruction's."""

    def __init__(self, ins: Instruction, callee: str) -> None:
        super().__init__(ins, f"calls '{callee}', which is already running (recursion)")


def check_call_graph(computations: Mapping[str, Computation], start: str) -> int:
    """Check that every walk from ``start`` ends, fast: no call cycle, calls at most
    :data:`MAX_CALL_DEPTH` deep, at most :data:`MAX_WALK_SITES` instruction runs to
    visit and :data:`MAX_EXECUTIONS` runs of any one. Time linear in the module's
    size, memory no deeper than the module. Returns the instruction runs a walk
    following every call visits, loops of up to :func:`unroll_limit` iterations
    unrolled (an upper bound on every walk). Raises :class:`CallGraphError` (a
    :class:`RecursiveCallError` for a cycle) naming the calling instruction."""
    order = _post_order(computations, start)
    size = _check_sizes(computations, order, _unroll_limit(computations, order))
    _check_executions(computations, order)
    return size


def unroll_limit(computations: Mapping[str, Computation], start: str) -> int:
    """The longest loop a walk from ``start`` may unroll: :data:`MAX_UNROLL`, or, when
    that walk would visit over :data:`MAX_WALK_SITES` instruction runs (a layer scan
    around windowed einsum loops, unrolled both), the longest of the module's shorter
    trip counts whose walk fits (the outer loop then one scaled copy); when none does,
    :data:`MAX_UNROLL` (and :func:`check_call_graph` refuses the module)."""
    return _unroll_limit(computations, _post_order(computations, start))


def _unroll_limit(computations: Mapping[str, Computation], order: list[str]) -> int:
    trips = {
        call.num_runs
        for name in order
        for _, call in _edges(computations[name])
        if call.role == "loop_body" and call.num_runs < MAX_UNROLL
    }
    for limit in (MAX_UNROLL, *sorted(trips, reverse=True)):
        try:
            _check_sizes(computations, order, limit)
        except CallGraphError:
            continue
        return limit
    return MAX_UNROLL


def _edges(comp: Computation) -> Iterator[tuple[Instruction, Call]]:
    return ((ins, call) for ins in comp.instructions.values() for call in calls(ins))


def _post_order(computations: Mapping[str, Computation], start: str) -> list[str]:
    """Computations reached from ``start``, each after its callees (an iterative DFS)."""
    order: list[str] = []
    active, done = {start}, set()
    stack = [(start, _edges(computations[start]))]
    while stack:
        name, edges = stack[-1]
        step = next(edges, None)
        if step is None:
            stack.pop()
            active.discard(name)
            done.add(name)
            order.append(name)
            continue
        ins, call = step
        if call.callee in active:
            raise RecursiveCallError(ins, call.callee)
        if call.callee not in done:
            active.add(call.callee)
            stack.append((call.callee, _edges(computations[call.callee])))
    return order


def _check_sizes(
    computations: Mapping[str, Computation], order: list[str], unroll: int | None = MAX_UNROLL
) -> int:
    """Call depth and instruction runs a walk visits (loops unrolled up to ``unroll``
    iterations) from the last computation of ``order`` (the start)."""
    height: dict[str, int] = {}
    sites: dict[str, int] = {}
    for name in order:  # callees first
        height[name], sites[name] = 1, 0
        for ins in computations[name].instructions.values():
            sites[name] += 1
            for call in calls(ins):
                height[name] = max(height[name], 1 + height[call.callee])
                if height[name] > MAX_CALL_DEPTH:
                    raise CallGraphError(
                        ins,
                        f"calls '{call.callee}': a chain of {height[name]} nested "
                        f"computations (limit {MAX_CALL_DEPTH})",
                    )
                sites[name] += _frames(call, unroll) * sites[call.callee]
                if sites[name] > MAX_WALK_SITES:
                    raise CallGraphError(
                        ins,
                        f"calls '{call.callee}': over {MAX_WALK_SITES:,} instruction runs "
                        "to walk (calls nested or repeated, loops unrolled up to "
                        f"{MAX_UNROLL}; limit {MAX_WALK_SITES:,})",
                    )
    return sites[order[-1]]


def _frames(call: Call, unroll: int | None = MAX_UNROLL) -> int:
    """Frames a walk makes of one call: each iteration of a loop it may unroll, else 1."""
    loop = call.role in ("loop_body", "loop_condition")
    return call.num_runs if loop and unroll is not None and call.num_runs <= unroll else 1


def _check_executions(computations: Mapping[str, Computation], order: list[str]) -> None:
    """Most runs of any computation per run of the start (loop trip counts multiplied)."""
    runs = dict.fromkeys(order, 0)
    runs[order[-1]] = 1
    for name in reversed(order):  # callers first
        for ins, call in _edges(computations[name]):
            runs[call.callee] = max(runs[call.callee], runs[name] * call.num_runs)
            if runs[call.callee] > MAX_EXECUTIONS:
                raise CallGraphError(ins, "runs over 2**63-1 times (nested loop trip counts)")


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
