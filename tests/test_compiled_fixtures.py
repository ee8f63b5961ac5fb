"""The modules ``tpusim compile`` made for TPU topologies (tests/fixtures/compiled/, by
tools/compile_fixtures.py), replayed with no JAX.

Oracles: XLA's own ``cost_analysis()`` stored in each artifact (FLOPs, loop bodies
once); a count of the collectives read off the HLO text with regular expressions
(one per ``channel_id``: the TPU backend's async collective fusions copy a collective
under its channel id, times the model's layer count inside the layer-scan loops); and
the closed-form matmul FLOPs of the compact model's training step.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

import pytest

from tpusim.program.hlo.artifact import load_compiled, read_artifact
from tpusim.workloads.hlo import hlo_summary

HERE = Path(__file__).parent / "fixtures" / "compiled"
#: fixture -> the shipped system it replays on (its chip's pod).
SYSTEMS = {
    "dense-v5e-2x2": "v5e-pod",
    "moe-v5e-2x2": "v5e-pod",
    "dense-v5p-2x2x2": "v5p-pod",
    "dense-tpu7x-sparsecore": "ironwood-256",
    "decode-v6e-2x2": "v6e-pod",
    "pallas-v5e": "v5e-pod",
    "maxtext-v5e-2x2": "v5e-pod",
}
#: XLA's cost analysis counts a Pallas call only by the ``cost_estimate`` it carries,
#: and splash attention carries none: in these fixtures XLA's FLOPs leave them out.
WITH_SPLASH = ("pallas-v5e", "maxtext-v5e-2x2")
#: |tpusim / XLA - 1| for FLOPs with loop bodies once: XLA counts elementwise work in
#: a few fusions differently (measured: 0.3% to 2.1% below XLA on these fixtures).
FLOPS_TOLERANCE = 0.05
KINDS = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute")
_BYTES = {"bf16": 2, "f32": 4, "s32": 4, "u32": 4, "pred": 1, "s8": 1, "u8": 1, "f16": 2}


def _path(name: str) -> str:
    return str(HERE / f"{name}.json.gz")


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_replays_with_no_unknown_op(name):
    record = hlo_summary(_path(name), SYSTEMS[name], "analytic")
    assert record["unknown_ops"] == {}
    assert record["step_time_s"] > 0
    assert record["compiled"]["xla_flops"] > 0


def _unestimated_pallas_flops(module) -> float:
    """FLOPs tpusim gives the Pallas calls that carry no cost_estimate (loop bodies
    once): what XLA's cost analysis leaves out."""
    from tpusim.program.hlo.callgraph import Policy, walk
    from tpusim.program.hlo.cost import instruction_flops

    policy = Policy(frozenset({"loop_body", "call", "fused", "async"}), loop_trip_counts=False)
    return sum(
        instruction_flops(site.frame.computation, site.instruction)
        for site in walk(module.computations, module.entry, policy)
        if site.instruction.opcode == "custom-call"
        and "cost_estimate" not in site.instruction.attrs.get("backend_config", "")
    )


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_flops_agree_with_xla_cost_analysis(name):
    module, _, artifact = load_compiled(_path(name))
    xla = artifact.cost_analysis["flops"]
    ours = module.flops(loop_trip_counts=False) - _unestimated_pallas_flops(module)
    assert ours == pytest.approx(xla, rel=FLOPS_TOLERANCE)
    if name in WITH_SPLASH:  # and the splash kernels are there, costed
        assert _unestimated_pallas_flops(module) > 0


def _computations(text: str) -> dict[str, list[str]]:
    comps: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if m := re.match(r"^(?:ENTRY )?%([\w.\-]+) .*\{$", line):
            current = m.group(1)
            comps[current] = []
        elif line == "}" or line.startswith("}, "):  # not "}}, ..." closing a kernel's
            current = None  # metadata that spans lines
        elif current is not None:
            comps[current].append(line)
    return comps


def _loop_depth(comps: dict[str, list[str]]) -> dict[str, int]:
    """Loop bodies above each computation (by the first caller found)."""
    callers: dict[str, tuple[str, bool]] = {}
    for name, lines in comps.items():
        for line in lines:
            for key, callee in re.findall(r"\b(calls|to_apply|body|condition)=%([\w.\-]+)", line):
                callers.setdefault(callee, (name, key == "body"))

    def depth(name: str) -> int:
        if name not in callers:
            return 0
        caller, is_body = callers[name]
        return depth(caller) + is_body

    return {name: depth(name) for name in comps}


def _bytes(shape: str) -> int:
    """Bytes of every array in a (tuple) shape's text, layouts skipped."""
    arrays = re.findall(r"([a-z]\w*)\[([\d,]*)\]", re.sub(r"\{[^{}]*\}", "", shape))
    return sum(_BYTES[t] * math.prod(int(d) for d in dims.split(",") if d) for t, dims in arrays)


_LINE_RE = re.compile(r"%([\w.\-]+) = (.*?) (" + "|".join(KINDS) + r")(-start)?\(([^)]*)\)")


def _text_collectives(text: str, trips: int) -> tuple[Counter, float]:
    """Count and nccl-tests bytes of the collectives, from the text alone: all-gather
    its gathered output, the others their operands (every element of a tuple)."""
    comps = _computations(text)
    depth = _loop_depth(comps)
    seen: dict[str, tuple[str, int, float]] = {}
    for name, lines in comps.items():
        shapes = dict(re.findall(r"%([\w.\-]+) = (.*?) [a-z][\w\-]*\(", "\n".join(lines)))
        for line in lines:
            if not (m := _LINE_RE.search(line)):
                continue
            _, out, kind, _, operands = m.groups()
            if kind == "all-gather":
                size = _bytes(out)
            else:
                size = sum(_bytes(shapes[o]) for o in re.findall(r"%([\w.\-]+)", operands))
            key = re.search(r"channel_id=(\d+)", line)
            seen[key.group(1) if key else line] = (kind, trips ** depth[name], size)
    count: Counter = Counter()
    total = 0.0
    for kind, runs, size in seen.values():
        count[kind] += runs
        total += runs * size
    return count, total


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_collectives_agree_with_a_count_of_the_text(name):
    module, _, artifact = load_compiled(_path(name))
    trips = artifact.fields["request"].get("layers", 2)  # MaxText's: base_num_decoder_layers
    count, total = _text_collectives(artifact.hlo, trips)
    assert dict(module.collectives) == dict(count)
    assert module.collective_bytes_per_chip == pytest.approx(total, rel=1e-9)


def _train_matmul_flops(request: dict, devices: int) -> float:
    """Matmul FLOPs per device of the compact model's training step (tiny-dense.yaml):
    each layer forward, its rematerialised forward less the last MLP matmul (dead for
    the backward, which XLA drops), the backward at twice the forward; the unembedding
    forward and backward."""
    d, heads, kv, hd, ff, vocab = 256, 4, 2, 64, 1024, 1024
    seq, tokens = request["seq"], request["batch"] * request["seq"]
    weights = d * heads * hd * 2 + d * kv * hd * 2 + 3 * d * ff
    attention = 2 * seq * heads * hd * 2  # QK^T and PV per token, no causal skipping
    layer = 2 * weights + attention
    per_token = request["layers"] * (4 * layer - 2 * ff * d) + 3 * 2 * d * vocab
    return per_token * tokens / devices


@pytest.mark.parametrize("name", ["dense-v5e-2x2", "dense-v5p-2x2x2", "dense-tpu7x-sparsecore"])
def test_the_layer_loops_run_their_trip_count(name):
    module, program, artifact = load_compiled(_path(name))
    request = artifact.fields["request"]
    loops = [
        i
        for c in module.computations.values()
        for i in c.instructions.values()
        if i.opcode == "while"
    ]
    assert [loop.inferred_trips for loop in loops] == [request["layers"]] * 2  # fwd, bwd
    matmul = sum(op.flops for op in program.ops if op.kind == "matmul")
    assert matmul == pytest.approx(_train_matmul_flops(request, len(artifact.devices)), rel=1e-9)
    assert module.flops(loop_trip_counts=False) < 0.5 * module.flops_per_chip


def test_ironwood_runs_two_devices_per_chip():
    """tpu7x:2x2x1: 8 devices, 2 per chip (libtpu's device list); the replay puts each
    pair on one chip and the chip does both devices' FLOPs."""
    artifact = read_artifact(_path("dense-tpu7x-sparsecore"))
    assert artifact.devices_per_chip == 2
    chips = artifact.device_chips((16, 16, 16))
    assert sorted(Counter(chips).values()) == [2, 2, 2, 2]
    record = hlo_summary(_path("dense-tpu7x-sparsecore"), "ironwood-256", "analytic")
    module, _, _ = load_compiled(_path("dense-tpu7x-sparsecore"))
    assert record["chips"] == 4
    assert record["flops_per_chip"] == pytest.approx(2 * module.flops_per_chip)


def test_sparsecore_collectives_run_asynchronously():
    """With the SparseCore offload flags the all-gathers and reduce-scatters run in
    computations on the ``sparsecore`` thread, called by call-start/call-done: each is
    an overlapping collective op."""
    module, program, artifact = load_compiled(_path("dense-tpu7x-sparsecore"))
    threads = Counter(c.execution_thread for c in module.computations.values())
    on_sparsecore = artifact.hlo.count('async_execution_thread="sparsecore"')
    assert threads["sparsecore"] > 0 and on_sparsecore > 0
    overlapping = [op for op in program.ops if op.kind == "collective" and op.overlap]
    assert len(overlapping) >= on_sparsecore


def test_pallas_kernels_are_costed_by_what_they_compute():
    """A megablox gmm (lhs [512, 256] through 4 groups of [256, 512]) is 2 m k n FLOPs
    (its cost_estimate says so too); a causal splash attention forward over 4 heads of
    512 tokens, head dimension 128, does QK^T and PV over the S (S + 1) / 2 query-key
    pairs of the lower triangle: 2 matmuls x 2 x 4 heads x 128 x 512 x 513 / 2."""
    _, program, artifact = load_compiled(_path("pallas-v5e"))
    kernels = {op.name.split(".")[0]: op for op in program.ops if op.kind == "kernel"}
    assert kernels["gmm"].mxu_flops == 2 * 512 * 256 * 512
    causal = 2 * 2 * 4 * 128 * 512 * 513 // 2
    assert kernels["splash_mha_fwd_no_residuals"].mxu_flops == causal
    assert "tpu_custom_call" in artifact.hlo


def test_a_scenario_replays_an_artifact_as_tpusim_hlo_does(tmp_path, capsys):
    """``kind: hlo`` with a compile artifact: Ironwood's 8 devices on 4 chips, the same
    step time as ``tpusim hlo``."""
    import json

    from helpers import run

    path = tmp_path / "s.yaml"
    path.write_text(
        "name: t\nplots: false\nnetwork: {fidelity: analytic}\nsystems: [ironwood-256]\n"
        f"workloads:\n  - {{name: c, kind: hlo, path: {_path('dense-tpu7x-sparsecore')}}}\n"
    )
    code, out, _ = run(
        capsys, "run", str(path), "--json", "--quiet", "--jobs", "1", "--out", str(tmp_path / "o")
    )
    assert code == 0
    row = json.loads(out)["results"][0]
    direct = hlo_summary(_path("dense-tpu7x-sparsecore"), "ironwood-256", "analytic")
    assert row["chips"] == direct["chips"] == 4
    assert row["step_time_s"] == pytest.approx(direct["step_time_s"], rel=1e-12)
