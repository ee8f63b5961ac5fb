"""HLO custom calls (Pallas ``tpu_custom_call``): costed from what the module says or
counted as unknown, against a hand-written fixture whose numbers are worked out here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run

from tpusim.program.hlo import load_hlo, parse_hlo

FIXTURE = Path(__file__).parent / "fixtures" / "hlo_custom" / "pallas_attention_4.hlo.txt"
BF16 = 2

# splash_mha_fwd on q [2, 8, 2048, 128], k and v [2, 2, 2048, 128] (GQA): causal, blocks
# of 512, so 4 blocks a side and 4 * 5 / 2 = 10 tiles per query head.
HEADS = 2 * 8
PAIRS = 2048 * 2049 / 2
ATTENTION_FLOPS = HEADS * PAIRS * 2 * (128 + 128)
ATTENTION_BYTES = HEADS * (2048 * 128 * BF16 + 10 * 512 * 256 * BF16 + 2048 * 128 * BF16 + 2048 * 4)
ESTIMATE_FLOPS = 2147483648  # the matmul kernel's cost_estimate
ESTIMATE_BYTES = 8388608


def test_kernels_the_module_describes_become_kernel_ops():
    module, program = load_hlo(FIXTURE)
    ops = {op.name: op for op in program.ops}
    attention, estimated = ops["custom-call.5"], ops["custom-call.7"]
    assert attention.kind == estimated.kind == "kernel"
    assert attention.mxu_flops == ATTENTION_FLOPS
    assert attention.bytes == ATTENTION_BYTES
    assert attention.padded_flops == HEADS * 10 * 512 * 512 * 2 * 256
    assert (estimated.mxu_flops, estimated.bytes) == (ESTIMATE_FLOPS, ESTIMATE_BYTES)
    assert module.flops_per_chip == ATTENTION_FLOPS + ESTIMATE_FLOPS + 1024 * 1024  # + all-reduce


def test_an_undescribed_kernel_is_its_bytes_and_counted_unknown():
    module, program = load_hlo(FIXTURE)
    mystery = next(op for op in program.ops if op.name == "custom-call.8")
    assert mystery.kind == "elementwise"
    assert mystery.bytes == 2 * 1024 * 1024 * 4  # operand + result
    assert dict(module.unknown_ops) == {"custom-call:tpu_custom_call": 1}


@pytest.mark.parametrize(
    ("name", "times_forward"),
    [
        ("splash_mha_bwd", 2.0),  # the fused flash backward: twice the forward's FLOPs
        # splash's split backward: the dK/dV kernel does 4 of the fused backward's 5
        # matmuls, the dQ kernel 3 (each recomputes the scores and dP)
        ("splash_mha_bwd_dkv", 2.0 * 4 / 5),
        ("splash_mha_bwd_dq", 2.0 * 3 / 5),
    ],
)
def test_a_backward_kernel_is_costed_as_the_flash_backward(name, times_forward):
    text = FIXTURE.read_text().replace("splash_mha_fwd_residuals", name)
    module = parse_hlo(text, "bwd.hlo")
    expected = times_forward * ATTENTION_FLOPS + ESTIMATE_FLOPS + 1024 * 1024
    assert module.flops_per_chip == pytest.approx(expected, rel=1e-12)


def test_tpusim_hlo_warns_once_and_reports_unknown_ops(capsys):
    code, out, err = run(capsys, "hlo", str(FIXTURE), "--system", "v6e-pod", "--json")
    assert code == 0
    record = json.loads(out)
    assert record["unknown_ops"] == {"custom-call:tpu_custom_call": 1}
    assert record["flops_per_chip"] == ATTENTION_FLOPS + ESTIMATE_FLOPS + 1024 * 1024
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tpusim: warning:")
    assert "custom-call:tpu_custom_call (1)" in lines[0]


def test_the_hlo_workload_row_counts_unknown_ops(tmp_path, capsys):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "name: t\ndescription: t\nsystems: [v6e-pod]\nworkloads:\n"
        f"  - {{name: pallas, kind: hlo, path: {FIXTURE}}}\n"
    )
    code, out, err = run(capsys, "run", str(scenario), "--json", "--quiet",
                         "--out", str(tmp_path / "out"))  # fmt: skip
    assert code == 0, err
    row = json.loads(out)["results"][0]
    assert row["unknown_ops"] == 1
    assert row["flops_per_chip"] == pytest.approx(ATTENTION_FLOPS + ESTIMATE_FLOPS, rel=1e-3)


def test_an_attention_kernel_with_other_operands_stays_unknown():
    """A paged kernel's K/V pages are not [heads, len, head_dim]: costed by bytes only."""
    text = (
        "HloModule paged, num_partitions=1\n\n"
        "ENTRY %main (q: bf16[16,8,128], kv: bf16[64,16,2,128]) -> bf16[16,8,128] {\n"
        "  %q = bf16[16,8,128]{2,1,0} parameter(0)\n"
        "  %kv = bf16[64,16,2,128]{3,2,1,0} parameter(1)\n"
        "  ROOT %flash_paged.1 = bf16[16,8,128]{2,1,0} custom-call(%q, %kv, %kv), "
        'custom_call_target="tpu_custom_call", backend_config={"custom_call_config": '
        '{"body": "TUxJUgA="}}, metadata={op_name="jit(decode)/flash_paged/pallas_call"}\n'
        "}\n"
    )
    module = parse_hlo(text, "paged.hlo")
    assert dict(module.unknown_ops) == {"custom-call:tpu_custom_call": 1}
    assert module.flops_per_chip == 0
