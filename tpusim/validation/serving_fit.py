"""The fit of the serving overheads (``tpusim calibrate --serving``, ``tpusim validate
--serving --fit``): per (server profile, chip), the host time and the HBM efficiency
minimising the sum of squared log errors on that profile's ``fit`` figures of that
chip only (holdout figures are never fitted), the sampler passes as the profile gives
them; and the profiles with the fitted terms written back as YAML
(:mod:`tpusim.serving.servers`), each calibrated value naming the figures it was
fitted on (``fit_on``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpusim.errors import InputError
from tpusim.serving.overheads import IterationOverheads
from tpusim.serving.servers import (
    ChipTerms,
    ServerProfile,
    load_server,
    locate_server,
    profile_data,
)
from tpusim.validation.serving import (
    FIT_HBM_EFFICIENCY,
    FIT_HOST_RANGE_S,
    FIT_HOST_TOLERANCE_S,
    Figure,
    Simulator,
    Terms,
    cases,
    shipped_overheads,
)


@dataclass(frozen=True)
class Fitted:
    """The terms fitted for one (server, chip), the figures (ids) and points fitted
    on, and the loss (sum of squared log errors)."""

    server: str
    chip: str
    overheads: IterationOverheads
    fit_on: tuple[str, ...]
    points: int
    loss: float
    host_identified: bool = True


def _loss(rows: list[dict[str, Any]]) -> float:
    errors = [r["error"] for r in rows if r["error"] is not None]
    return sum(math.log(max(1 + e, 1e-300)) ** 2 for e in errors)  # a 0 s simulation: -1


def _golden(loss: Callable[[float], float], lo: float, hi: float, tolerance: float) -> float:
    """The minimiser of a unimodal ``loss`` on ``[lo, hi]`` (golden-section search)."""
    ratio = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = loss(c), loss(d)
    while b - a > tolerance:
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = loss(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = loss(d)
    return (a + b) / 2


def fit_group(
    figures: list[Figure], simulator: Simulator
) -> tuple[IterationOverheads, float, bool]:
    """The (host time, HBM efficiency) minimising the loss on ``figures`` (all of one
    server and chip), by coordinate descent: the host time by a golden-section search
    on :data:`FIT_HOST_RANGE_S` at full HBM efficiency, the efficiency on the grid
    :data:`FIT_HBM_EFFICIENCY` at that host time, the host time again. The flag: the
    host time is identified (False when no host time fits as well: under async
    scheduling an iteration that takes longer on the chips than on the host hides it;
    the profile's host time is then kept if it fits as well)."""
    first = figures[0]
    passes = shipped_overheads(first).sampling_passes
    key = (first.server, first.chip)

    def loss(host_s: float, efficiency: float) -> float:
        terms: Terms = {key: IterationOverheads(host_s, efficiency, passes)}
        return _loss(cases(figures, terms, simulator))

    host = _golden(lambda h: loss(h, 1.0), *FIT_HOST_RANGE_S, FIT_HOST_TOLERANCE_S)
    efficiency = min(FIT_HBM_EFFICIENCY, key=lambda e: loss(host, e))
    host = _golden(lambda h: loss(h, efficiency), *FIT_HOST_RANGE_S, FIT_HOST_TOLERANCE_S)
    best = loss(host, efficiency)
    identified = abs(loss(0.0, efficiency) - best) > 1e-12
    shipped_host = shipped_overheads(first).host_s
    if not identified and abs(loss(shipped_host, efficiency) - best) <= 1e-12:
        host = shipped_host
    return IterationOverheads(host, efficiency, passes), best, identified


def fit(figures: list[Figure], simulator: Simulator | None = None) -> list[Fitted]:
    """One :class:`Fitted` per (server, chip) with ``fit`` figures. Raises InputError
    when no figure has ``split: fit``."""
    simulator = simulator or Simulator()
    groups: dict[tuple[str, str], list[Figure]] = {}
    for f in figures:
        if f.split == "fit":
            groups.setdefault((f.server, f.chip), []).append(f)
    if not groups:
        raise InputError("tpusim validate --serving --fit: no figure has split: fit")
    out = []
    for (server, chip), group in groups.items():
        overheads, loss, identified = fit_group(group, simulator)
        points = sum(len(f.measured) for f in group)
        ids = tuple(f.id for f in group)
        out.append(Fitted(server, chip, overheads, ids, points, loss, identified))
    return out


def terms_of(fitted: list[Fitted]) -> Terms:
    """The fitted overheads by (server, chip)."""
    return {(f.server, f.chip): f.overheads for f in fitted}


def fitted_profile(profile: ServerProfile, fits: list[Fitted]) -> ServerProfile:
    """``profile`` with each fit's chip terms replaced: the host time (when the fit
    identifies it; else kept) and the HBM efficiency ``calibrated`` with their
    ``fit_on``, the sampler passes kept."""
    chips = dict(profile.chips)
    for f in fits:
        base = profile.terms(f.chip)
        note = (
            f"fitted with the other calibrated term on {len(f.fit_on)} figure(s), "
            f"{f.points} point(s) (tpusim calibrate --serving)"
        )
        graded = {"grade": "calibrated", "fit_on": f.fit_on, "url": "", "note": note}
        host_time = base.host_time
        if f.host_identified:
            host_time = host_time.model_copy(update={"value": f.overheads.host_s, **graded})
        chips[f.chip] = ChipTerms(
            host_time=host_time,
            hbm_efficiency=base.hbm_efficiency.model_copy(
                update={"value": f.overheads.hbm_efficiency, **graded}
            ),
            sampling_passes=base.sampling_passes,
        )
    return profile.model_copy(update={"chips": chips})


def write_profiles(folder: str | Path, fits: list[Fitted]) -> list[Path]:
    """Each fitted server's profile (:func:`fitted_profile`) as ``FOLDER/<name>.yaml``
    (written atomically), one file per profile whatever name or path its figures give
    it; the paths. Raises OSError, and InputError for a profile name that is not a
    plain file name or is a symbolic link in FOLDER (:func:`~tpusim.results.files.file_in`)
    or for two profiles of one name."""
    import yaml

    from tpusim.results.files import atomic_write_text, file_in

    out = Path(folder)
    by_name: dict[str, tuple[Path, list[Fitted]]] = {}
    for f in fits:
        profile = load_server(f.server)
        source, mine = by_name.setdefault(profile.name, (locate_server(f.server).resolve(), []))
        if source != locate_server(f.server).resolve():
            raise InputError(
                f"server profiles {source} and {f.server} are both named '{profile.name}': "
                "their fitted profiles would overwrite each other; rename one"
            )
        twin = next((g for g in mine if g.chip == f.chip), None)
        if twin is not None:
            raise InputError(
                f"figures name one server profile ('{profile.name}') as '{twin.server}' and "
                f"'{f.server}': their {f.chip} fits would overwrite each other; give one name"
            )
        mine.append(f)
    targets = {name: file_in(out, f"{name}.yaml", "server profile name") for name in by_name}
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, (_, mine) in by_name.items():
        profile = load_server(mine[0].server)
        data = profile_data(fitted_profile(profile, mine))
        header = (
            f"# Server profile {profile.name}, written by tpusim calibrate --serving "
            f"(fitted on: {', '.join(i for f in mine for i in f.fit_on)}).\n"
        )
        path = targets[name]
        atomic_write_text(path, header + yaml.safe_dump(data, sort_keys=False, width=88))
        paths.append(path)
    return paths
