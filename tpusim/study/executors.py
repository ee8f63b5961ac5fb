"""Executors: what runs a point set's points (:mod:`tpusim.study.pointset`) and hands each
result back as it is done. :class:`Executor` is the protocol; :class:`InProcess` runs
them here, :class:`~tpusim.study.workers.WorkerProcesses` in local worker processes
(``--jobs N``) and :class:`Dask` on a Dask cluster (``--executor dask``);
:func:`executor_for` picks one from a run's options
(:class:`~tpusim.study.options.ScenarioRunOptions`).

On Dask there is one task per (system, workload point): the scheduler spreads them over every worker
of the cluster, so a design-space sweep of hundreds of points scales past one
machine. Without ``--scheduler`` a :class:`distributed.LocalCluster` of
:data:`LOCAL_WORKERS` worker processes is started for the run and closed after it.

The scenario is read once, in the client: its typed point set is scattered to the
workers (every system file is read there only), and each worker keeps the latest point
set's systems' topologies and route caches for the next task. A workload that reads a
file when it runs (an HLO text) needs it at the same path on the workers: a shared file
system or the same checkout. Workload kinds registered at runtime in the client do
not reach Dask workers (they import tpusim afresh); register them in a module the
workers import. Dask is an extra: ``pip install 'tpusim[dask]'``.
"""

from __future__ import annotations

import logging
import signal
import socket
import struct
import threading
import time
import warnings
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

from tpusim.errors import InputError
from tpusim.network.routes import RouteCache
from tpusim.study.options import ScenarioRunOptions
from tpusim.study.point_log import default_jobs
from tpusim.study.points import PointResult, Report, run_point, run_points
from tpusim.study.pointset import PointSet
from tpusim.study.progress import Progress
from tpusim.study.workers import WorkerProcesses
from tpusim.topology import Topology, build_topology

if TYPE_CHECKING:
    from distributed import Client, Future, LocalCluster

__all__ = ["LOCAL_WORKERS", "Dask", "Executor", "InProcess", "executor_for"]


class Executor(Protocol):
    """Runs every point of a point set; ``report`` is called in this process with each
    result as soon as it is back; returns the results in the point set's order."""

    def run(self, point_set: PointSet, progress: Progress, report: Report) -> list[PointResult]:
        """Every point of ``point_set`` (``progress``'s clock may be restarted when the
        first point starts)."""
        ...


@dataclass(frozen=True)
class InProcess:
    """The ``local`` executor with ``--jobs 1``: each system's points in order here."""

    def run(self, point_set: PointSet, progress: Progress, report: Report) -> list[PointResult]:
        """Every point of ``point_set``, one system after the other."""
        results = []
        for system in range(len(point_set.systems)):
            for result in run_points(point_set, point_set.on_system(system)):
                report(result)
                results.append(result)
        return results


def executor_for(options: ScenarioRunOptions, num_systems: int) -> Executor:
    """The executor ``options`` ask for: Dask; else worker processes when more than
    one system can run at once (``jobs``, default :func:`~tpusim.study.point_log.default_jobs`);
    else this process. Raises InputError for a scheduler without the Dask executor."""

    options.check_executor()
    if options.executor == "dask":
        return Dask(options.scheduler)
    jobs = options.jobs or default_jobs(num_systems)
    if jobs > 1 and num_systems > 1:
        return WorkerProcesses(min(jobs, num_systems))
    return InProcess()


#: Worker processes of the embedded local cluster (assumption: the 2 cores of a
#: small machine; a real cluster is given with ``--scheduler``).
LOCAL_WORKERS = 2

#: Seconds to wait for a scheduler given by address before giving up (assumption).
CONNECT_TIMEOUT_S = 20

#: Seconds a first TCP connection to ``--scheduler`` may take before the address is
#: reported unreachable (assumption: a reachable scheduler answers in milliseconds).
PROBE_TIMEOUT_S = 3.0


def _distributed() -> ModuleType:
    try:
        import distributed
    except ImportError:
        raise InputError(
            "the dask executor needs Dask's distributed scheduler: pip install 'tpusim[dask]'"
        ) from None
    return distributed


@dataclass(frozen=True)
class Dask:
    """The ``dask`` executor: one task per point on the scheduler at ``scheduler``, or
    on a local cluster of :data:`LOCAL_WORKERS` processes started for the run."""

    scheduler: str | None = None

    def run(self, point_set: PointSet, progress: Progress, report: Report) -> list[PointResult]:
        """Every point of ``point_set`` as one Dask task; the results in the point set's order.
        Each finished task is passed to ``report`` as it comes back (``progress``'s
        clock starts at the first task). Raises InputError when dask is not installed
        or the scheduler cannot be reached (an address that does not parse, resolve or
        accept a connection fails within :data:`PROBE_TIMEOUT_S`)."""
        distributed = _distributed()
        if self.scheduler is not None:
            check_scheduler(self.scheduler)
        cluster = None
        try:
            if self.scheduler is None:
                cluster = _local_cluster(distributed)
            client = _client(distributed, self.scheduler or cluster)
            progress.began = time.perf_counter()  # the ETA counts from the first task
            try:
                return _run_tasks(distributed, client, point_set, report)
            finally:
                client.close()
        finally:
            if cluster is not None:
                cluster.close()


def _local_cluster(distributed: ModuleType) -> LocalCluster:
    """The embedded cluster, its worker processes started with Ctrl-C ignored (an
    ignored signal stays ignored in a child, and Python then installs no handler): a
    Ctrl-C at the terminal reaches every process of the group, and only this one
    should answer it (one line), closing the workers as it unwinds; interrupted
    workers would each print a traceback and leak semaphores (resource_tracker
    warnings)."""

    if threading.current_thread() is not threading.main_thread():
        return _start_cluster(distributed)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return _start_cluster(distributed)
    finally:
        signal.signal(signal.SIGINT, previous)


#: The local cluster's log level: above CRITICAL, so nothing (a Ctrl-C that closes the
#: scheduler's comms mid-write is logged CRITICAL with a traceback by the scheduler).
SILENT = logging.CRITICAL + 1


def _start_cluster(distributed: ModuleType) -> LocalCluster:
    """The local cluster, quiet: its scheduler and workers log nothing (:data:`SILENT`;
    a worker whose scheduler closed under it as a Ctrl-C unwinds the run logs a
    heartbeat ERROR with a traceback, the scheduler a CRITICAL "Closed comm" when a
    Ctrl-C closes a comm it was writing to; a task's own error reaches the client as an
    exception anyway), and the
    scheduler's HTTP server taking another port than 8787 (another Dask cluster on the
    machine) is no warning of tpusim's."""

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Port \d+ is already in use")
        return distributed.LocalCluster(
            n_workers=LOCAL_WORKERS,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=SILENT,
        )


def _client(distributed: ModuleType, address: str | LocalCluster | None) -> Client:
    try:
        return distributed.Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(f"scheduler {address}: cannot reach the Dask scheduler ({exc})") from None


def check_scheduler(address: str) -> None:
    """Raise InputError, within about PROBE_TIMEOUT_S, unless ``address`` is a
    ``tcp://HOST:PORT`` (or ``HOST:PORT``) that resolves and accepts a TCP connection
    (Dask's own client retries for CONNECT_TIMEOUT_S and then fails with a traceback).
    Other Dask protocols (``inproc``, ``ucx``...) are left to Dask."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    if scheme not in ("tcp", "tls"):
        return
    host, colon, port = rest.rpartition(":")
    host = host.strip("[]")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"scheduler {address}: expected an address like tcp://HOST:8786")
    try:
        with socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S) as probe:
            problem = _handshake_problem(probe) if scheme == "tcp" else None
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise InputError(
            f"scheduler {address}: cannot reach the Dask scheduler ({reason})"
        ) from None
    if problem is not None:
        raise InputError(f"scheduler {address}: {problem}")


#: Largest first message of a Dask scheduler's handshake (bytes, its 8-byte length
#: prefix): a dict of a few settings is a few hundred bytes (assumption, with room).
MAX_HANDSHAKE_BYTES = 1 << 20


def _handshake_problem(probe: socket.socket) -> str | None:
    """Why the peer on ``probe`` is not a Dask scheduler, or None: a Dask server sends
    its handshake first, a message whose 8-byte length prefix is small; a server of
    another protocol (HTTP waits for a request) sends nothing within PROBE_TIMEOUT_S,
    closes, or sends text. Raises OSError of the socket."""
    head = b""
    try:
        while len(head) < 8:
            chunk = probe.recv(8 - len(head))
            if not chunk:
                return "closed the connection without a Dask handshake (not a Dask scheduler?)"
            head += chunk
    except TimeoutError:
        return (
            f"no Dask handshake within {PROBE_TIMEOUT_S:g} s (another service on that "
            "port? a Dask scheduler listens on 8786 by default)"
        )
    (size,) = struct.unpack("<Q", head)
    if not 0 < size <= MAX_HANDSHAKE_BYTES:
        return "answers in another protocol than Dask's (not a Dask scheduler?)"
    return None


def _run_tasks(
    distributed: ModuleType, client: Client, point_set: PointSet, report: Report
) -> list[PointResult]:
    """Scatter the point set to every worker, submit one task per point and collect them
    as they finish."""
    shared = client.scatter(point_set, broadcast=True, hash=False)
    keys = [(p.system_index, p.run_index) for p in point_set.points]
    futures: list[Future] = [
        client.submit(dask_point, shared, str(shared.key), s, r, pure=False) for s, r in keys
    ]
    results: dict[tuple[int, int], PointResult] = {}
    try:
        for future in distributed.as_completed(futures, loop=client.loop):
            result = future.result()
            results[(result.system_index, result.run_index)] = result
            report(result)
    except BaseException:
        client.cancel(futures)
        raise
    return [results[key] for key in keys]


@dataclass
class _Loaded:
    """What a Dask worker process keeps between tasks: the latest point set (by the key of
    its scattered copy) and its systems' (topology, route cache)."""

    key: str
    systems: dict[int, tuple[Topology, RouteCache]] = field(default_factory=dict)


_loaded: list[_Loaded] = []  # at most one: the latest


def dask_point(point_set: PointSet, key: str, system: int, run: int) -> PointResult:
    """One (system, workload point) of ``point_set`` (scattered under ``key``) on a Dask
    worker, each system's topology and route cache built once per point set."""
    if not _loaded or _loaded[0].key != key:
        _loaded[:] = [_Loaded(key)]
    loaded = _loaded[0]
    if system not in loaded.systems:
        topology = build_topology(point_set.systems[system])
        loaded.systems[system] = (topology, RouteCache(topology))
    topology, routes = loaded.systems[system]
    points = point_set.on_system(system)
    point = next(p for p in points if p.run_index == run)
    result = run_point(point_set, point, topology, routes)
    result.topology = topology if point is points[0] else None
    return result
