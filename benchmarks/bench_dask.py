"""Per-task overhead of ``tpusim run --executor dask`` (issue 15).

Runs one scenario of many cheap points (a small matmul program on the 256-chip v5e pod,
swept over its resident memory) in-process (``--jobs 1``) and as one Dask task per point on a local
cluster of 2 worker processes, and a batch of no-op tasks on the same cluster, then
prints:

- the cluster's start-up time;
- the no-op round trip per task (submit, schedule, run, gather: Dask's own cost);
- wall time per point in-process and on Dask, and the overhead per task in worker
  CPU-seconds: (Dask wall x workers - in-process wall) / points, i.e. what each task
  costs beyond the simulation (loading the scenario once per worker, pickling the
  record, the scheduler).

Run: ``python benchmarks/bench_dask.py [POINTS]`` (default 200).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tpusim.study.executors import LOCAL_WORKERS, run_on_dask  # noqa: E402
from tpusim.study.progress import Progress  # noqa: E402
from tpusim.study.runner import run_scenario  # noqa: E402
from tpusim.study.scenario import Scenario  # noqa: E402

SCENARIO = """\
name: bench-dask
systems: [v5e-pod]
workloads:
  - name: mm
    kind: program
    ops: [{{name: mm, kind: matmul, m: 512, n: 512, k: 512}}]
    sweep: {{memory: [{points}]}}
"""


def scenario_text(points: int) -> str:
    sizes = ", ".join(f"{{hbm: {i + 1} MB}}" for i in range(points))
    return SCENARIO.format(points=sizes)


def noop(x: int) -> int:
    return x


def noop_round_trip_s(client, count: int = 500) -> float:
    """Seconds per no-op task, submitted and gathered as one batch."""
    began = time.perf_counter()
    client.gather([client.submit(noop, i, pure=False) for i in range(count)])
    return (time.perf_counter() - began) / count


def main() -> int:
    import distributed

    points = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.yaml"
        path.write_text(scenario_text(points))
        scenario = Scenario(path, max_points=points)
        began = time.perf_counter()
        local = run_scenario(scenario, progress=False, jobs=1)
        local_s = time.perf_counter() - began

        began = time.perf_counter()
        cluster = distributed.LocalCluster(
            n_workers=LOCAL_WORKERS, threads_per_worker=1, dashboard_address=None
        )
        startup_s = time.perf_counter() - began
        with distributed.Client(cluster) as client:
            per_noop_s = noop_round_trip_s(client)
        began = time.perf_counter()
        results = run_on_dask(scenario, Progress(0, enabled=False), cluster.scheduler_address)
        dask_s = time.perf_counter() - began
        cluster.close()
    assert [r.outcome.record.row() for r in results] == local.rows
    overhead_s = (dask_s * LOCAL_WORKERS - local_s) / points
    print(f"points                 {points} (one Dask task each, {LOCAL_WORKERS} workers)")
    print(f"cluster start-up       {startup_s:.2f} s")
    print(f"no-op task round trip  {per_noop_s * 1e3:.2f} ms per task")
    print(f"in-process (--jobs 1)  {local_s:.2f} s, {local_s / points * 1e3:.1f} ms per point")
    print(f"dask                   {dask_s:.2f} s, {dask_s / points * 1e3:.1f} ms per point")
    print(f"overhead per task      {overhead_s * 1e3:.1f} ms of worker time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
