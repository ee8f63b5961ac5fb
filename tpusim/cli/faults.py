"""``tpusim faults``: a Monte Carlo of a collective's time against random failed links,
and the fault flags shared by ``tpusim collective`` (``--faults``, ``--fail-links``,
``--seed``, ``--routing``).

For each count of failed links (0 and the powers of two in ``--fail-links LOW:HIGH``,
both ends included) the collective runs ``--trials`` times, each trial with links drawn
from its own seed (derived from ``--seed``: the same seed, the same table); the table
gives percentiles of the time per count and the slowdown against the healthy run. As a
runtime would, every trial re-plans the algorithm on the surviving links (``auto``; the
row lists the algorithms its trials ran), and a trial whose failed links cut the group
apart is counted as ``disconnected``, not timed (percentiles over the connected trials;
null when none is). The fidelity is ``analytic`` by default (static faults: routes
around the failed links, the busiest surviving link bounds each step); ``--out DIR``
writes ``faults.csv`` and the degradation curve ``faults.png``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from tpusim import units
from tpusim.cli.flags import check_network_work, size_flag
from tpusim.config.faults import ROUTINGS, FaultPlan, Routing, load_faults, plan_flags
from tpusim.errors import InputError
from tpusim.network import NETWORKS
from tpusim.vocabulary import OPS, Op

if TYPE_CHECKING:
    from tpusim.config.loader import System
    from tpusim.engine import CollectiveOptions, CollectiveResult

T = TypeVar("T")
R = TypeVar("R")

PERCENTILES = (10, 50, 90, 99)
"""Percentiles of the time reported per count of failed links (percent)."""

MAX_TRIALS = 10_000
"""Most trials per count ``tpusim faults`` accepts (a guard against typos, not a model limit)."""


def add_fault_flags(p: argparse.ArgumentParser, default_routing: str | None = "minimal") -> None:
    """``--faults FILE``, ``--fail-links N``, ``--seed S``, ``--routing R``."""
    p.add_argument("--faults", help="YAML file of faults (see README: Faults and routing)")
    p.add_argument("--fail-links", type=int, help="N random links down from the start")
    p.add_argument("--seed", type=int, help="seed of the random failures (default 0)")
    p.add_argument(
        "--routing", choices=ROUTINGS, default=default_routing, help="path choice per flow"
    )


def _check_flags(args: argparse.Namespace) -> None:
    if args.fail_links is not None and args.fail_links < 0:
        raise InputError(f"--fail-links {args.fail_links}: must be >= 0")
    if args.seed is not None and args.seed < 0:
        raise InputError(f"--seed {args.seed}: must be >= 0")


def run_fault_flags(args: argparse.Namespace) -> dict[str, Any]:
    """``tpusim run``'s fault flags as workload keys set on every workload taking them."""
    _check_flags(args)
    plan = load_faults(args.faults) if args.faults else None
    return plan_flags(plan, args.fail_links, args.seed) | {"routing": args.routing}


def fault_options(args: argparse.Namespace) -> tuple[FaultPlan | None, Routing, int]:
    """(faults, routing, seed) from the fault flags (None, minimal, 0 on the healthy
    path), as :class:`~tpusim.engine.CollectiveOptions` takes them."""
    _check_flags(args)
    plan = load_faults(args.faults) if args.faults else None
    faults = None
    if plan is not None or args.fail_links:
        faults = (plan or FaultPlan()).with_random(args.fail_links, args.seed)
    return faults, args.routing, 0 if args.seed is None else args.seed


def fault_lines(rec: dict[str, Any]) -> list[str]:
    """The text lines ``tpusim collective`` adds for faults and routing."""
    failed = ", ".join(f"{a}-{b}" for a, b in rec["failed_links"]) or "none"
    lines = [
        f"faults          links down {failed}; {len(rec['degraded_links'])} degraded; "
        f"chips down {rec['chips_down'] or 'none'}",
        f"routing         {rec['routing']} ({rec['nonminimal_flows']:,} flows non-minimal, "
        f"{rec['rerouted_flows']:,} rerouted around failures)",
    ]
    return lines + [f"adapted         {note}" for note in rec["adapted"]]


def link_counts(text: str) -> list[int]:
    """``LOW:HIGH`` -> LOW, the powers of two between, HIGH (sorted, distinct)."""
    try:
        low, high = (int(part) for part in text.split(":"))
    except ValueError:
        raise InputError(f"--fail-links {text}: expected LOW:HIGH, e.g. 0:16") from None
    if not 0 <= low <= high:
        raise InputError(f"--fail-links {text}: need 0 <= LOW <= HIGH")
    powers = [2**k for k in range(0, high.bit_length() + 1) if low <= 2**k <= high]
    return sorted({low, high, *powers})


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("faults", help="Monte Carlo: a collective's time vs random failed links")
    p.add_argument("system", help="shipped system name or path to a system YAML")
    p.add_argument("--op", required=True, choices=OPS)
    p.add_argument("--bytes", required=True, help="size with a unit (nccl-tests convention)")
    p.add_argument("--fail-links", default="0:16", help="LOW:HIGH failed links (default 0:16)")
    p.add_argument("--trials", type=int, default=20, help="trials per count (default 20)")
    p.add_argument("--seed", type=int, default=1, help="seed of the trials (default 1)")
    p.add_argument("--fidelity", choices=NETWORKS.names(), default="analytic")
    p.add_argument("--routing", choices=ROUTINGS, default="minimal")
    p.add_argument("--out", help="folder for faults.csv and the degradation curve faults.png")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_faults)


def _trials(run: Callable[[T], R], trials: list[T]) -> tuple[list[R], int]:
    """``run`` of every trial: the results of those that finished, and how many found
    the topology cut in two (DisconnectedError)."""
    from tpusim.network.faults import DisconnectedError

    results, cut = [], 0
    for trial in trials:
        try:
            results.append(run(trial))
        except DisconnectedError:
            cut += 1
    return results, cut


def _runner(system: System, op: Op, size: float) -> Callable[[CollectiveOptions], CollectiveResult]:
    """Runs the collective on ``system`` with given options (one topology and route
    cache for every trial)."""
    from tpusim.engine import run_collective
    from tpusim.network.routes import RouteCache
    from tpusim.topology import build_topology

    topology = build_topology(system)
    routes = RouteCache(topology)
    chip, name = system.chip, system.name

    def run(options: CollectiveOptions) -> CollectiveResult:
        result, _ = run_collective(
            topology, op, size, options, chip=chip, system_name=name, routes=routes
        )
        return result

    return run


def _check_runnable(system: System, op: Op, size: float, options: CollectiveOptions) -> None:
    """Refuse (InputError) a system with nothing to fail and a collective over the work
    limit of its fidelity (the limit ``tpusim collective`` applies)."""
    if system.num_chips < 2:
        raise InputError(
            f"{system.name}: one chip has no links to fail and a collective on it moves "
            "nothing; give a system of 2 or more chips"
        )
    check_network_work(system.num_chips, [size], options, op)


def monte_carlo(
    system_name: str,
    op: Op,
    size: float,
    counts: list[int],
    trials: int,
    seed: int,
    fidelity: str = "analytic",
    routing: Routing = "minimal",
) -> dict[str, Any]:
    """The Monte Carlo record (see the module docstring)."""
    from dataclasses import replace

    from tpusim.config.loader import load_system
    from tpusim.engine import CollectiveOptions
    from tpusim.network import NetworkSettings

    system = load_system(system_name)
    options = CollectiveOptions(network=NetworkSettings.of(fidelity), routing=routing)
    _check_runnable(system, op, size, options)
    run = _runner(system, op, size)
    healthy = run(options)
    options = replace(options, name_replanning=False)  # the healthy algorithm is the record's
    draw = np.random.default_rng(seed)
    rows = []
    for count in counts:
        plans = [
            FaultPlan(fail_links=count, seed=int(draw.integers(2**31)))
            for _ in range(trials if count else 1)
        ]
        results, cut = _trials(run, [replace(options, faults=plan) for plan in plans])
        times = np.array([r.time_s for r in results])
        algorithms = sorted({r.algorithm for r in results})
        rows.append(_row(count, times, healthy.time_s, cut, algorithms))
    return {
        "system": system.name,
        "op": op,
        "bytes": size,
        "algorithm": healthy.algorithm,  # healthy; each row lists its trials' algorithms
        "fidelity": fidelity,
        "routing": routing,
        "trials": trials,
        "seed": seed,
        "healthy_time_s": healthy.time_s,
        "counts": rows,
    }


def _row(
    count: int, times: np.ndarray, healthy_s: float, cut: int, algorithms: list[str]
) -> dict[str, Any]:
    row: dict[str, Any] = {"failed_links": count, "trials": int(times.size) + cut}
    row["disconnected"] = cut
    if not times.size:  # every trial cut the group apart: no time to report
        row |= {f"p{q}_s": None for q in PERCENTILES} | {"mean_s": None, "max_s": None}
        return row | {"p50_slowdown": None, "algorithms": ""}
    for q in PERCENTILES:
        row[f"p{q}_s"] = float(np.percentile(times, q))
    row["mean_s"], row["max_s"] = float(times.mean()), float(times.max())
    row["p50_slowdown"] = row["p50_s"] / healthy_s if healthy_s > 0 else None
    row["algorithms"] = ";".join(algorithms)
    return row


def cmd_faults(args: argparse.Namespace) -> None:
    if not 1 <= args.trials <= MAX_TRIALS:
        raise InputError(f"--trials {args.trials}: must be in 1..{MAX_TRIALS}")
    if args.seed < 0:
        raise InputError(f"--seed {args.seed}: must be >= 0")
    counts = link_counts(args.fail_links)
    size = size_flag(args.bytes, "--bytes")
    record = monte_carlo(
        args.system, args.op, size, counts, args.trials, args.seed, args.fidelity, args.routing
    )
    if args.out:
        record["files"] = [str(p) for p in write_outputs(record, Path(args.out))]
    if args.json:
        from tpusim.results.files import json_text

        print(json_text(record))
        return
    print("\n".join(_lines(record)))


def _lines(rec: dict[str, Any]) -> list[str]:
    head = (
        f"{rec['system']}: {rec['op']} of {units.format_bytes(rec['bytes'])} "
        f"({rec['algorithm']}, {rec['fidelity']}, {rec['routing']} routing), "
        f"{rec['trials']} trials per count; healthy {units.format_time(rec['healthy_time_s'])}"
    )
    lines = [head, f"{'links down':>10} " + " ".join(f"{'p' + str(q):>10}" for q in PERCENTILES)]
    for row in rec["counts"]:
        cut = f"  {row['disconnected']} disconnected" if row["disconnected"] else ""
        if row["p50_s"] is None:
            lines.append(f"{row['failed_links']:>10} every trial disconnected{cut}")
            continue
        cells = " ".join(f"{units.format_time(row[f'p{q}_s']):>10}" for q in PERCENTILES)
        lines.append(
            f"{row['failed_links']:>10} {cells}  x{row['p50_slowdown']:.2f}"
            f"  {row['algorithms']}{cut}"
        )
    lines += [f"wrote {f}" for f in rec.get("files", [])]
    return lines


def write_outputs(rec: dict[str, Any], out: Path) -> list[Path]:
    """``faults.csv`` (one row per count) and ``faults.png`` (the degradation curve)."""
    import pandas as pd

    from tpusim.results.files import atomic_csv, check_folder_target, output_error

    check_folder_target(out, "--out")
    try:
        out.mkdir(parents=True, exist_ok=True)
        atomic_csv(pd.DataFrame(rec["counts"]), out / "faults.csv", index=False)
        _plot(rec, out / "faults.png")
    except OSError as exc:
        raise output_error("--out", out, exc) from None
    return [out / "faults.csv", out / "faults.png"]


def _plot(rec: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rec["counts"] if r["p50_s"] is not None]  # connected trials only
    x = [r["failed_links"] for r in rows]
    ms = {q: [r[f"p{q}_s"] * 1e3 for r in rows] for q in PERCENTILES}
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.fill_between(x, ms[10], ms[90], alpha=0.25, label="p10-p90")
    ax.plot(x, ms[50], marker="o", label="median")
    ax.plot(x, ms[99], linestyle="--", label="p99")
    ax.axhline(rec["healthy_time_s"] * 1e3, color="grey", linewidth=0.8, label="healthy")
    ax.set_xlabel("failed links (random, count)")
    ax.set_ylabel("collective time (ms)")
    ax.set_title(
        f"{rec['system']}: {rec['op']} of {units.format_bytes(rec['bytes'])} "
        f"({rec['trials']} trials per count)"
    )
    ax.set_ylim(bottom=0)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
