"""The fit of the serving overheads (``tpusim calibrate --serving``, ``tpusim validate
--serving --fit``): per server profile, one host time and one HBM efficiency shared by
every chip generation, minimising the sum of squared log errors on that profile's
``fit`` figures (holdout figures are never fitted), the sampler passes as the profile
gives them; and the profiles with the fitted terms written back as YAML
(:mod:`tpusim.serving.servers`), each calibrated value naming the figures it was
fitted on (``fit_on``) and the profile the chips they ran on (``measured_chips``).

The search (:func:`fit_group`): the loss is the sum of absolute log errors, each public
source (a repository, or a pull request's URL) weighing the same; the HBM
efficiency on the grid :data:`~tpusim.validation.serving.FIT_HBM_EFFICIENCY`, the fixed
device time per iteration and the host time on
:data:`~tpusim.validation.serving.FIT_HOST_S` (the host shows under synchronous
scheduling, and under async scheduling where the host is slower than the chips), the
each in turn by ternary search (every simulation memoised). No MoE term is fitted: a
profile's ``moe_kernel`` derives the routed experts' weight reads, row tiles and
unpermute from the kernel's structure (:mod:`tpusim.program.builders.gmm_ep`), and its
``moe_token_time`` is derived from tpu-inference's own measurement of the layer, so no
chip's figures have to identify a term another chip borrows. Two checks before a fit
is kept (:class:`Fitted`): a fit
that would raise its own figures' median absolute error above the shipped terms' is
refused (the shipped terms are kept and the output says so), and a term that lands on a
grid bound is named (``at_bound``) in the output and in the written file's note.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import median
from typing import Any

import yaml

from tpusim.errors import InputError
from tpusim.results.files import atomic_write_text
from tpusim.serving.overheads import IterationOverheads
from tpusim.serving.servers import (
    ChipTerms,
    HostTime,
    ServerProfile,
    load_server,
    locate_server,
    profile_data,
)
from tpusim.validation.serving import (
    FIT_HBM_EFFICIENCY,
    FIT_HOST_S,
    Figure,
    Simulator,
    Terms,
    cases,
    shipped_overheads,
)


@dataclass(frozen=True)
class Fitted:
    """The terms fitted for one server profile (shared by its chips): the figures (ids)
    and points fitted on, the chips they ran on, the loss (sum of absolute log
    errors), whether the host time is identified, the terms at a grid bound, the fit
    figures' median absolute error with the shipped terms and with these, whether the
    fit was kept (``kept`` False: it raised that error, so the shipped terms stand)."""

    server: str
    overheads: IterationOverheads
    fit_on: tuple[str, ...]
    chips: tuple[str, ...]
    points: int
    loss: float
    host_identified: bool = True
    at_bound: tuple[str, ...] = ()
    shipped_error: float | None = None
    fitted_error: float | None = None
    kept: bool = True


def source_of(figure: Figure) -> str:
    """The public source a figure comes from: its repository, else its URL."""
    return figure.repo or figure.url


def _loss(rows: list[dict[str, Any]], source: dict[str, str]) -> float:
    """Sum of absolute log errors (an L1 loss: the median error is what is reported, and
    one badly modelled metric must not drag every other point off), each public source
    weighing the same whatever its count of points (``source``: figure id -> source), so
    that one guide's sweep does not outvote every other publication."""
    counts: dict[str, int] = {}
    for r in rows:
        if r["error"] is not None:
            counts[source[r["id"]]] = counts.get(source[r["id"]], 0) + 1
    return sum(
        abs(math.log(max(1 + r["error"], 1e-300))) / counts[source[r["id"]]]  # 0 s: -1
        for r in rows
        if r["error"] is not None
    )


def median_error(rows: list[dict[str, Any]]) -> float | None:
    """Median absolute error of ``rows`` (None when none is simulated)."""
    errors = [abs(r["error"]) for r in rows if r["error"] is not None]
    return median(errors) if errors else None


def grid_argmin(grid: tuple[float, ...], loss: Callable[[float], float]) -> float:
    """The point of the sorted ``grid`` minimising a unimodal ``loss``, by ternary
    search on the indices (each point evaluated at most once)."""
    seen: dict[int, float] = {}

    def at(i: int) -> float:
        if i not in seen:
            seen[i] = loss(grid[i])
        return seen[i]

    lo, hi = 0, len(grid) - 1
    while hi - lo > 2:
        m1, m2 = lo + (hi - lo) // 3, hi - (hi - lo) // 3
        if at(m1) <= at(m2):
            hi = m2
        else:
            lo = m1
    return grid[min(range(lo, hi + 1), key=at)]


#: Most rounds of the coordinate descent (a design choice: the fits seen converge in
#: two or three).
MAX_ROUNDS = 4


def fit_group(
    figures: list[Figure], simulator: Simulator, start: IterationOverheads
) -> tuple[IterationOverheads, float, bool]:
    """The terms on the grids minimising the loss on ``figures`` (every server among
    them takes the same terms) from ``start``, by coordinate descent: the HBM
    efficiency, the fixed device time per iteration and the host time in turn, each at
    the others' current values, until a round moves none (at most :data:`MAX_ROUNDS`).
    The sampler passes and the MoE terms are ``start``'s. The flag: the host time is
    identified (False when 0 s fits as well: under async scheduling an iteration longer
    on the chips than on the host hides the host; ``start``'s value is then kept)."""
    servers = {f.server for f in figures}
    source = {f.id: source_of(f) for f in figures}

    def loss(o: IterationOverheads) -> float:
        return _loss(cases(figures, dict.fromkeys(servers, o), simulator), source)

    def best(o: IterationOverheads, field: str, grid: tuple[float, ...]) -> IterationOverheads:
        value = grid_argmin(grid, lambda x: loss(replace(o, **{field: x})))
        return replace(o, **{field: value})

    searched = [("hbm_efficiency", FIT_HBM_EFFICIENCY), ("step_s", FIT_HOST_S)]
    searched += [("host_s", FIT_HOST_S)]
    o = start
    for _ in range(MAX_ROUNDS):
        before = o
        for field, grid in searched:
            o = best(o, field, grid)
        if o == before:
            break
    host = abs(loss(replace(o, host_s=0.0)) - loss(o)) > 1e-12
    o = replace(o, host_s=o.host_s if host else start.host_s)
    return o, loss(o), host


def _bounds(overheads: IterationOverheads, identified: bool) -> tuple[str, ...]:
    """The terms of ``overheads`` that sit on a bound of their grid."""
    out = []
    if overheads.hbm_efficiency in (FIT_HBM_EFFICIENCY[0], FIT_HBM_EFFICIENCY[-1]):
        out.append(f"hbm_efficiency {overheads.hbm_efficiency:g}")
    if overheads.step_s == FIT_HOST_S[-1]:
        out.append(f"step_time {overheads.step_s * 1e3:g} ms")
    if identified and overheads.host_s in (FIT_HOST_S[0], FIT_HOST_S[-1]):
        out.append(f"host_time {overheads.host_s * 1e3:g} ms")
    return tuple(out)


def fit_server(
    server: str, figures: list[Figure], simulator: Simulator, start: IterationOverheads
) -> Fitted:
    """:func:`fit_group` on ``figures`` (named ``server``; they may be of several
    servers), checked against ``start`` (see the module docstring)."""
    overheads, loss, identified = fit_group(figures, simulator, start)
    servers = {f.server for f in figures}
    before = median_error(cases(figures, dict.fromkeys(servers, start), simulator))
    after = median_error(cases(figures, dict.fromkeys(servers, overheads), simulator))
    kept = before is None or after is None or after <= before + 1e-12
    return Fitted(
        server,
        overheads if kept else start,
        tuple(f.id for f in figures),
        tuple(dict.fromkeys(f.chip for f in figures)),
        sum(len(f.measured) for f in figures),
        loss,
        identified,
        _bounds(overheads, identified) if kept else (),
        before,
        after,
        kept,
    )


def fit(figures: list[Figure], simulator: Simulator | None = None) -> list[Fitted]:
    """One :class:`Fitted` per server profile with ``fit`` figures (its chips pooled).
    Raises InputError when no figure has ``split: fit``."""
    simulator = simulator or Simulator()
    groups: dict[str, list[Figure]] = {}
    for f in figures:
        if f.split == "fit":
            groups.setdefault(f.server, []).append(f)
    if not groups:
        raise InputError("tpusim validate --serving --fit: no figure has split: fit")
    return [
        fit_server(server, group, simulator, shipped_overheads(group[0]))
        for server, group in groups.items()
    ]


def terms_of(fitted: list[Fitted]) -> Terms:
    """The fitted overheads by server."""
    return {f.server: f.overheads for f in fitted}


def fitted_profile(profile: ServerProfile, fit: Fitted) -> ServerProfile:
    """``profile`` with its shared terms replaced by ``fit``'s: the host time (when the
    fit identifies it; else kept), the fixed step time and the HBM
    efficiency ``calibrated`` with their
    ``fit_on`` (a term at a grid bound says so in its note), the sampler passes kept,
    ``measured_chips`` the chips fitted on. A fit that was not kept leaves the profile
    as it is."""
    if not fit.kept:
        return profile
    base = profile.terms
    note = (
        f"fitted with the other calibrated term on {len(fit.fit_on)} figure(s), "
        f"{fit.points} point(s) of {', '.join(fit.chips)} (tpusim calibrate --serving)"
    )

    def graded(term: str) -> dict[str, Any]:
        bound = [b for b in fit.at_bound if b.startswith(term)]
        said = f"; at the bound of its grid ({bound[0]}): the figures ask for more" if bound else ""
        return {"grade": "calibrated", "fit_on": fit.fit_on, "url": "", "note": note + said}

    host_time = base.host_time
    if fit.host_identified:
        host_time = host_time.model_copy(update={"value": fit.overheads.host_s, **graded("host")})
    step = {"value": fit.overheads.step_s, **graded("step")}
    terms = ChipTerms(
        host_time=host_time,
        hbm_efficiency=base.hbm_efficiency.model_copy(
            update={"value": fit.overheads.hbm_efficiency, **graded("hbm")}
        ),
        sampling_passes=base.sampling_passes,
        expert_efficiency=base.expert_efficiency,
        step_time=HostTime.model_validate(step),
        moe_layer_time=base.moe_layer_time,
        moe_token_time=base.moe_token_time,
    )
    return profile.model_copy(update={"terms": terms, "measured_chips": fit.chips})


def write_profiles(folder: str | Path, fits: list[Fitted]) -> list[Path]:
    """Each fitted server's profile (:func:`fitted_profile`) as ``FOLDER/<file>.yaml``,
    the file named after the profile's own file (never after a name read from a
    measurement file, so no name reaches outside ``folder``); written atomically; the
    paths. Raises OSError."""

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for fit in fits:
        profile = load_server(fit.server)
        path = out / Path(locate_server(fit.server).name).with_suffix(".yaml").name
        if path in paths:
            raise InputError(
                f"tpusim calibrate --serving: two server profiles would be written to {path} "
                f"({fit.server} and another of that file name); give them distinct file names"
            )
        data = profile_data(fitted_profile(profile, fit))
        said = "kept as shipped: the fit raised its figures' error" if not fit.kept else ""
        header = (
            f"# Server profile {profile.name}, written by tpusim calibrate --serving "
            f"(fitted on: {', '.join(fit.fit_on)}){'; ' + said if said else ''}.\n"
        )
        atomic_write_text(path, header + yaml.safe_dump(data, sort_keys=False, width=88))
        paths.append(path)
    return paths
