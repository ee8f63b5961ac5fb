"""``tpusim plan`` speed (issue 21 target: one model on one pod under 60 s).

Plans Llama 3.1 405B on the 9,216-chip ``ironwood-pod`` at a global batch of 2,304
sequences of 8,192 tokens, as ``tpusim plan llama-3.1-405b ironwood-pod
--global-batch 2304 --seq 8192`` does, in-process, and prints the wall and CPU time,
the peak memory (resident set), the search's counts, each simulation's wall time, and
the best layout against pure FSDP.

Run: ``python benchmarks/bench_plan.py``
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from typing import TypeVar

from tpusim.planner import PlanRequest, plan_layouts

T = TypeVar("T")

TARGET_S = 15.0
"""Issue 34's target for the final answer on 2 cores (issue 21's was 60 s)."""

BEFORE_S = 13.9
"""Wall time before the closed-form stages were split over the workers (main at
f1d9623, 2026-12-06, a quiet 2-core machine, `tpusim plan` as a process: 17.8 s user
+ 2.7 s sys): best fsdp 2304 x tensor 4, remat none, sequence_parallel, 7.443 s at
flow (30.1% MFU); 21,572 considered, 4,293 fit. Issue 21's first figure was 43.8 s
(2026-12-05, load 1.4)."""

BEFORE_CPU_S = 20.5
"""CPU seconds (with the workers') at the same point (17.8 s user + 2.7 s sys). Side
by side (2026-12-06, `tpusim plan` as a process): at load 4, 21.4 s before and 15.4 s
after; at load ~2, 12.7 -> 8.2 s wall and 18.6 -> 14.2 s CPU."""

STAGES_BEFORE_S = {"memory": 3.9, "screen": 1.8}
"""CPU seconds of the closed-form stages in one process before (load 2.5, 2026-12-06;
wall 5.9 s and 2.7 s there)."""


def _cpu_s() -> float:
    """CPU seconds of this process and its finished workers."""
    own, workers = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + workers.ru_utime + workers.ru_stime


def stages() -> None:
    """The closed-form stages (memory pruning, screen), in this process one after the
    other and then over the request's workers as the search runs them: wall and CPU
    seconds (the workers' CPU is not counted by ``process_time``)."""
    from tpusim.config import load_system
    from tpusim.planner.search import candidates, closed_form, screen_all
    from tpusim.topology import build_topology

    request = PlanRequest("llama-3.1-405b", "ironwood-pod", 2304, 8192)
    system = load_system(request.system)
    topology = build_topology(system)
    timer = _Timer()
    report = timer.time("memory", lambda: candidates(request, system, topology))
    timer.time("screen", lambda: screen_all(report, system, topology))
    timer.time("both over the workers", lambda: closed_form(request, system, topology))
    print(
        "stages: "
        + ", ".join(
            f"{name} {wall:.1f} s wall ({cpu:.1f} s CPU here)" for name, wall, cpu in timer.rows
        )
        + f"; CPU before: memory {STAGES_BEFORE_S['memory']}, screen {STAGES_BEFORE_S['screen']}"
    )


class _Timer:
    """Wall and CPU seconds (this process's) of named calls."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, float, float]] = []

    def time(self, name: str, call: Callable[[], T]) -> T:
        began, cpu = time.perf_counter(), time.process_time()
        out = call()
        self.rows.append((name, time.perf_counter() - began, time.process_time() - cpu))
        return out


def main() -> None:
    stages()
    began_wall, began_cpu = time.perf_counter(), _cpu_s()
    result = plan_layouts(PlanRequest("llama-3.1-405b", "ironwood-pod", 2304, 8192))
    wall_s, cpu_s = time.perf_counter() - began_wall, _cpu_s() - began_cpu
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 2**30
    memory = result.memory
    print(
        f"plan llama-3.1-405b on ironwood-pod: {wall_s:.1f} s wall, {cpu_s:.1f} s CPU "
        f"(with the workers'), "
        f"peak RSS {peak_gib:.2f} GiB (target < {TARGET_S:.0f} s wall; before: "
        f"{BEFORE_S:.1f} s, {wall_s / BEFORE_S:.2f}x of it; CPU before {BEFORE_CPU_S:.1f} s, "
        f"{cpu_s / BEFORE_CPU_S:.2f}x of it)"
    )
    print(
        f"search: {memory.considered} considered, {memory.rejected} rejected by the "
        f"builder's checks, {len(memory.too_big)} out of memory, {len(memory.fitting)} fit"
    )
    for s in [*result.ranked, *result.confirmed]:
        layout = s.fitted.layout
        print(
            f"  {s.fidelity:<8} {layout.label():<36} remat {layout.remat.name:<4} "
            f"m {layout.microbatches:<3} step {s.step_time_s:7.3f} s  MFU {s.mfu:6.1%}  "
            f"({s.how}, {s.wall_s:.1f} s)"
        )
    best, reference = result.best(), result.reference_run()
    print(f"best: {best.fitted.layout.label()}, MFU {best.mfu:.1%} ({best.fidelity})")
    if reference is not None:
        print(f"pure FSDP: {reference.fitted.layout.label()}, MFU {reference.mfu:.1%}")


if __name__ == "__main__":
    main()
