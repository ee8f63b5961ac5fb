"""Serving jobs of a ``kind: jobs`` workload: an entry with ``serve`` (the ``kind:
serving`` keys: model, deployment, request stream) runs a service beside the training
jobs on one clock and one network (:func:`tpusim.serving.shared.run_jobs_serving`).

::

    - {name: train, chips: [0, 3], collective: {op: all-gather, bytes: 8 GiB}}
    - name: chat
      chips: [1, 2]                    # optional: default after the jobs before it
      serve: {model: llama-3.1-8b, tp: 1, disaggregate: "1:1", rate: inf,
              requests: 4, prompt_tokens: 512, output_tokens: 4}

A service takes consecutive chips (replica after replica; prefill replicas first when
disaggregated): from its ``chips``' first, which must list exactly them, or from the
chip after the highest one the entries before it hold. Its KV transfers are flows on
the shared network; a colocated service sends nothing on it (its replicas' own
collectives are in their iteration costs). The jobs workload's faults and routing act
on the shared network, so on the KV transfers (together and alone); a replica's own
collectives are in its iteration costs, computed on the healthy network, so under faults a service's
replicas take one chip each (else an error names the entry). It serves an open stream or a trace
(not ``concurrency`` or ``find_capacity``). Its row in the record's ``jobs`` gives
``time_s`` (its last request's end) together and alone, the slowdown, the
TTFT/TPOT/end-to-end percentiles and, disaggregated, the KV transfer times together
(``kv_transfer_p50_s``, ``kv_transfer_p99_s``) and alone (``alone_kv_transfer_*``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tpusim.config.yamlio import PathKey, format_path, line_of
from tpusim.engine import Simulation
from tpusim.engine.multijob import Job, JobsRun, chips_group
from tpusim.errors import ConfigError, InputError
from tpusim.program.ir import Program
from tpusim.serving.disaggregated import DisaggregatedService, transfer_summary
from tpusim.serving.metrics import summary
from tpusim.serving.options import ServeOptions, ServeSpec, with_environment
from tpusim.serving.requests import read_trace
from tpusim.serving.rows import Row
from tpusim.serving.run import check_options, stream_of
from tpusim.serving.scheduler import Request
from tpusim.serving.service import Runner
from tpusim.serving.shared import run_jobs_serving
from tpusim.workloads.registry import WorkloadContext
from tpusim.workloads.serving import at_workload

#: The row fields of a serving job copied from its run's summary.
SUMMARY_FIELDS = (
    "requests",
    "completed",
    "rejected",
    "ttft_p50_s",
    "ttft_p99_s",
    "tpot_p50_s",
    "tpot_p99_s",
    "e2e_p50_s",
    "e2e_p99_s",
    "output_tokens_per_s",
)


def entry_error(context: WorkloadContext, index: int, problem: str) -> ConfigError:
    """A ConfigError at job entry ``index`` of the workload."""
    path: PathKey = (*context.path, "jobs", index)
    return ConfigError(
        f"{context.system.name}: {problem}",
        file=context.file,
        path=format_path(path),
        line=line_of(context.lines, path),
    )


@dataclass(frozen=True)
class PlacedService:
    """A serving job placed: its entry ``index``, its chips as a :class:`Job` of no
    ops (for the overlap check), the service and its options."""

    index: int
    job: Job
    runner: Runner
    options: ServeOptions


def place_service(
    index: int,
    name: str,
    serve: ServeSpec,
    chips: list[int] | None,
    after: int,
    context: WorkloadContext,
) -> PlacedService:
    """Serving job ``name`` at entry ``index`` on its ``chips`` (consecutive) or from
    chip ``after``. Raises ConfigError at the entry (bad chips) or at the option to
    blame under its ``serve``."""
    options = with_environment(
        serve,
        network=context.network,
        power_per_chip_W=context.power_per_chip_W,
        price_per_chip_hour_usd=context.price_per_chip_hour_usd,
    )
    if options.find_capacity or options.concurrency is not None:
        problem = (  # advice that keeps the workload: never 'drop it' (rate would default)
            "serves an open stream or a trace beside the training jobs, not a closed loop "
            "(concurrency) or a capacity search (find_capacity): give it the rate (requests/s) "
            "or the trace it should serve instead"
        )
        raise entry_error(context, index, f"serving job '{name}' {problem}")
    try:
        runner = check_options(options, context.system)
    except InputError as exc:
        serve_path = (*context.path, "jobs", index, "serve")
        raise at_workload(exc, replace(context, path=serve_path)) from None
    _check_faults_apply(runner, name, index, context)
    n, total = runner.chips, context.topology.num_chips
    first = after if chips is None else chips[0]
    wanted = list(range(first, first + n))
    if chips is not None and chips != wanted:
        raise entry_error(
            context,
            index,
            f"serving job '{name}' takes {n} consecutive chips, {first}..{first + n - 1}, "
            f"not {chips}",
        )
    if first + n > total:
        raise entry_error(
            context,
            index,
            f"serving job '{name}': {n} chips from chip {first} do not fit the system's {total}",
        )
    if isinstance(runner, DisaggregatedService):
        runner = DisaggregatedService(runner.service, runner.prefill, runner.decode, first)
    group = chips_group(context.topology, wanted, None)
    return PlacedService(index, Job(name, group, Program(name, ())), runner, options)


def _check_faults_apply(runner: Runner, name: str, index: int, context: WorkloadContext) -> None:
    """Under faults, a ConfigError at the entry for a service whose replicas span
    several chips: the faults act on the shared network (its KV transfers), not on the
    collectives inside a replica, which are in its iteration costs."""
    per_replica = int(runner.describe()["chips_per_replica"])  # type: ignore[arg-type]
    if context.faulty and per_replica > 1:
        raise entry_error(
            context,
            index,
            f"serving job '{name}': faults act on the shared network (KV transfers), not "
            f"inside a replica of {per_replica} chips, whose collectives are in its "
            "iteration costs: serve with tp 1 or drop the faults",
        )


def requests_of(options: ServeOptions) -> list[Request]:
    """A fresh copy of the options' requests: its trace, or its stream at its rate."""
    if options.trace:
        return read_trace(options.trace)
    rate = options.offered_rate_per_s
    assert rate is not None  # an open loop without a trace has a rate
    return stream_of(options)(rate)


def _end_s(requests: list[Request]) -> float:
    return max((r.finished_at for r in requests if r.finished_at is not None), default=0.0)


def _kv(service: Runner, prefix: str) -> Row:
    if not isinstance(service, DisaggregatedService):
        return {}
    row = transfer_summary(service)
    return {f"{prefix}{k}": row[k] for k in ("kv_transfer_p50_s", "kv_transfer_p99_s")}


def run_together(
    context: WorkloadContext, jobs: list[Job], services: list[PlacedService]
) -> tuple[JobsRun, list[Row]]:
    """The training ``jobs`` and the services on one clock and one network, then each
    service alone: the jobs' run and each service's row (see the module docstring)."""
    streams = [requests_of(s.options) for s in services]
    started = [(s.runner, requests) for s, requests in zip(services, streams, strict=True)]
    network = context.settings
    together, _ = run_jobs_serving(
        context.system, context.topology, context.routes, jobs, network, started
    )
    rows: list[Row] = []
    for placed, requests in zip(services, streams, strict=True):
        kv = _kv(placed.runner, "")
        alone = requests_of(placed.options)
        _serve_alone(placed.runner, alone, context)
        served = summary(requests, placed.runner.chips, placed.options.slo())
        row = job_row(placed.job, _end_s(requests), _end_s(alone))
        row["serve"] = placed.runner.describe()["model"]
        row |= {k: served.get(k) for k in SUMMARY_FIELDS}
        rows.append(row | kv | _kv(placed.runner, "alone_"))
    return together, rows


def _serve_alone(runner: Runner, requests: list[Request], context: WorkloadContext) -> None:
    """``runner`` serving ``requests`` alone on a network of its own with the point's
    faults and routing (as the training jobs alone run; without faults, the network a
    service has alone: :meth:`~tpusim.serving.service.Service.run`)."""
    if not context.faulty:
        runner.run(requests)
        return

    settings = replace(context.settings, port_rows=False)
    host = Simulation(
        context.system,
        Program(name="serving", ops=()),
        settings,
        topology=context.topology,
        routes=context.routes,
    )
    collect = runner.start(requests, host)
    host.env.run()
    collect()


def job_row(job: Job, time_s: float, alone_time_s: float) -> Row:
    """A job's row of the record's ``jobs``: its name, chips, time together and alone
    (s) and slowdown."""
    return {
        "name": job.name,
        "chips": int(job.chips.size),
        "time_s": time_s,
        "alone_time_s": alone_time_s,
        "slowdown": time_s / alone_time_s if alone_time_s > 0 else 1.0,
    }
