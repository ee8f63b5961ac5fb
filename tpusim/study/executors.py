"""Scenario points on a Dask cluster (``tpusim run SCENARIO --executor dask``).

One task per (system, workload point): the scheduler spreads them over every worker
of the cluster, so a design-space sweep of hundreds of points scales past one
machine. Without ``--scheduler`` a :class:`distributed.LocalCluster` of
:data:`LOCAL_WORKERS` worker processes is started for the run and closed after it.

A worker loads the scenario file itself (so the file, and every system and HLO file it
names, must be readable at the same path on the workers: a shared file system or the
same checkout) and keeps the latest scenario loaded, with each system's topology and
route cache, for the next task. Workload kinds registered at runtime in the client do
not reach Dask workers (they import tpusim afresh); register them in a module the
workers import. Dask is an extra: ``pip install 'tpusim[dask]'``.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tpusim.errors import InputError, SimulationError
from tpusim.study.points import PointResult, run_point
from tpusim.study.progress import Progress

__all__ = ["LOCAL_WORKERS", "run_on_dask"]

#: Worker processes of the embedded local cluster (assumption: the 2 cores of a
#: small machine; a real cluster is given with ``--scheduler``).
LOCAL_WORKERS = 2

#: Seconds to wait for a scheduler given by address before giving up (assumption).
CONNECT_TIMEOUT_S = 20

#: Seconds a first TCP connection to ``--scheduler`` may take before the address is
#: reported unreachable (assumption: a reachable scheduler answers in milliseconds).
PROBE_TIMEOUT_S = 3.0


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise InputError(
            "--executor dask needs Dask's distributed scheduler: pip install 'tpusim[dask]'"
        ) from None
    return distributed


def run_on_dask(
    scenario: Any, bar: Progress, scheduler: str | None, report: Callable[[PointResult], None]
) -> list[PointResult]:
    """Every (system, workload point) of ``scenario`` as one Dask task, on the scheduler
    at ``scheduler`` or a local cluster; the results in the scenario's order. Each
    finished task is passed to ``report`` as it comes back (``bar``'s clock starts at
    the first task). Raises InputError when dask is not installed or the scheduler
    cannot be reached (an address that does not parse, resolve or accept a connection
    fails within :data:`PROBE_TIMEOUT_S`)."""
    distributed = _distributed()
    if scheduler is not None:
        check_scheduler(scheduler)
    cluster = None
    try:
        if scheduler is None:
            cluster = distributed.LocalCluster(
                n_workers=LOCAL_WORKERS,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.ERROR,
            )
        client = _client(distributed, scheduler or cluster)
        bar.began = time.perf_counter()  # the ETA counts from the first task, not start-up
        try:
            return _run_tasks(distributed, client, scenario, report)
        finally:
            client.close()
    finally:
        if cluster is not None:
            cluster.close()


def _client(distributed: Any, address: Any) -> Any:
    try:
        return distributed.Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(
            f"--scheduler {address}: cannot reach the Dask scheduler ({exc})"
        ) from None


def check_scheduler(address: str) -> None:
    """Raise InputError, within about PROBE_TIMEOUT_S, unless ``address`` is a
    ``tcp://HOST:PORT`` (or ``HOST:PORT``) that resolves and accepts a TCP connection
    (Dask's own client retries for CONNECT_TIMEOUT_S and then fails with a traceback).
    Other Dask protocols (``inproc``, ``ucx``...) are left to Dask."""
    import socket

    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    if scheme not in ("tcp", "tls"):
        return
    host, colon, port = rest.rpartition(":")
    host = host.strip("[]")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"--scheduler {address}: expected an address like tcp://HOST:8786")
    try:
        with socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S):
            return
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise InputError(
            f"--scheduler {address}: cannot reach the Dask scheduler ({reason})"
        ) from None


def _run_tasks(
    distributed: Any, client: Any, scenario: Any, report: Callable[[PointResult], None]
) -> list[PointResult]:
    """Submit one task per point and collect them as they finish."""
    source = (type(scenario), str(Path(scenario.file).resolve()), _digest(scenario.file))
    keys = scenario.points()
    futures = [
        client.submit(
            dask_point, *source, scenario.max_points, scenario.fault_flags, s, r, pure=False
        )
        for s, r in keys
    ]
    results: dict[tuple[int, int], PointResult] = {}
    try:
        for future in distributed.as_completed(futures, loop=client.loop):
            result = future.result()
            if isinstance(result, tuple):  # the scenario did not load on the worker
                raise (InputError if result[0] == 2 else SimulationError)(result[1])
            results[(result.system_index, result.run_index)] = result
            report(result)
    except BaseException:
        client.cancel(futures)
        raise
    return [results[key] for key in keys]


def _digest(file: str) -> str:
    """The file's SHA-256: a worker reloads a scenario whose file changed."""
    return hashlib.sha256(Path(file).read_bytes()).hexdigest()


#: What a worker process keeps between tasks: the latest scenario loaded (by class,
#: file, digest and max points) and its systems' (topology, route cache).
_LOADED: dict[str, Any] = {}


def dask_point(
    scenario_class: Any,
    file: str,
    digest: str,
    max_points: int,
    fault_flags: dict[str, Any],
    system: int,
    point: int,
) -> PointResult | tuple[int, str]:
    """One (system, workload point) on a Dask worker (the scenario loaded there, once
    per file version); a tpusim error while loading comes back as (exit code, message)."""
    from tpusim.errors import TpusimError

    key = (scenario_class, file, digest, max_points, fault_flags)
    if _LOADED.get("key") != key:
        try:
            _LOADED.update(
                key=key, scenario=scenario_class(file, max_points, fault_flags), systems={}
            )
        except TpusimError as exc:
            _LOADED.clear()
            return exc.exit_code, str(exc)
    scenario, systems = _LOADED["scenario"], _LOADED["systems"]
    if system not in systems:
        from tpusim.network.routes import RouteCache
        from tpusim.topology import build_topology

        topology = build_topology(scenario.systems[system])
        systems[system] = (topology, RouteCache(topology))
    topology, routes = systems[system]
    result = run_point(scenario, system, point, topology, routes)
    first = next(r for r in range(len(scenario.runs)) if scenario.runs_on(r, system))
    result.topology = topology if point == first else None
    return result
