"""Whole-model training steps, timed (issue 13 targets, 2-core machine):

* an 80-layer Llama-3.1-70B-shaped step on ``ironwood-pod`` with pipeline 16, data 72,
  tensor 8 and 16 microbatches: under 10 s wall and 2 GB;
* a full DeepSeek-V3 step (61 layers, 256 experts) on ``tpu8t-superpod``: under 30 s;
* the whole-models study (``scenarios/whole-models.yaml``): under 3 minutes.

Each case runs in a fresh process (``run_case``: build, check memory, simulate with
reuse, no files written) and prints its wall time, CPU time, peak resident memory and
the simulated step. The wall time counts whatever else the machine runs; the CPU time
is what the case itself costs.
Run: ``python benchmarks/bench_whole_model.py [llama|deepseek|study]``.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STUDY = ROOT / "scenarios" / "whole-models.yaml"

LLAMA_70B = """name: bench-llama
description: llama-3.1-70b-shaped step
fidelity: flow
systems: [ironwood-pod]
workloads:
  - {name: llama-3.1-70b, kind: training_step, layers: 80, d_model: 8192, d_ff: 28672,
     heads: 64, kv_heads: 8, head_dim: 128, mlp: gated, vocab: 128256, seq: 8192,
     global_batch: 1152, mesh: {pipeline: 16, data: 72, tensor: 8}, microbatches: 16}
"""

DEEPSEEK_V3 = """name: bench-deepseek
description: deepseek-v3 step
fidelity: flow
flow_tolerance: 0.05
systems: [tpu8t-superpod]
workloads:
  - {name: deepseek-v3, kind: training_step, layers: 61, dense_layers: 3, d_model: 7168,
     d_ff: 18432, heads: 128, head_dim: 128, attention: mla, q_lora_rank: 1536,
     kv_lora_rank: 512, rope_head_dim: 64, mlp: gated, experts: 256, expert_d_ff: 2048,
     shared_experts: 1, top_k: 8, vocab: 129280, seq: 4096, global_batch: 15360,
     mesh: {pipeline: 20, data: 60, expert: 8}, microbatches: 32, recompute: true}
"""

CASES = {"llama": (LLAMA_70B, 10.0, 2.0), "deepseek": (DEEPSEEK_V3, 30.0, None)}


def run_case(text: str) -> dict:
    """Simulate the scenario ``text`` in this process; its figures."""
    start, cpu = time.perf_counter(), time.process_time()
    from tpusim.study.scenario import Scenario, run_scenario

    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(text)
    run = run_scenario(Scenario(f.name), progress=False, jobs=1)
    row = run.rows[0]
    return {
        "wall_s": time.perf_counter() - start,
        "cpu_s": time.process_time() - cpu,
        "max_rss_GB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9,
        "step_time_s": row["step_time_s"],
        "mfu": row["mfu"],
        "peak_hbm_GB": row["peak_hbm_bytes_per_chip"] / 1e9,
        "bubble": row.get("pipeline_bubble_fraction"),
    }


def case(name: str) -> bool:
    _, wall_target, rss_target = CASES[name]
    out = subprocess.run(
        [sys.executable, __file__, "--child", name], check=True, capture_output=True, text=True
    )
    f = json.loads(out.stdout)
    ok = f["wall_s"] < wall_target and (rss_target is None or f["max_rss_GB"] < rss_target)
    print(
        f"{name}: wall {f['wall_s']:.1f} s (CPU {f['cpu_s']:.1f} s, target {wall_target:.0f} s), "
        f"peak RSS {f['max_rss_GB']:.2f} GB"
        + (f" (target {rss_target:.0f} GB)" if rss_target else "")
        + f"; simulated step {f['step_time_s']:.3f} s, MFU {f['mfu']:.1%}, "
        f"peak HBM {f['peak_hbm_GB']:.1f} GB/chip, bubble {f['bubble']:.1%}"
    )
    return ok


def study() -> bool:
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "tpusim", "run", str(STUDY), "--out", out, "--quiet"],
            check=True,
            capture_output=True,
        )
        wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        f"whole-models study: wall {wall:.1f} s (CPU {usage.ru_utime + usage.ru_stime:.1f} s "
        "over its processes, target 180 s)"
    )
    return wall < 180


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        print(json.dumps(run_case(CASES[argv[1]][0])))
        return 0
    chosen = argv or ["llama", "deepseek", "study"]
    ok = [study() if name == "study" else case(name) for name in chosen]
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
