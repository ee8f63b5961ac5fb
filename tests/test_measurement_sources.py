"""The shipped whole-model measurements as data: every case says where its numbers are
(a file and a line or a commit), every file's splits follow its rule (recomputed here,
not with the loader's function), and where a run publishes both a step time and TFLOP/s
per device their product agrees with the model's FLOPs counted by hand."""

from __future__ import annotations

import re
from collections import defaultdict

import pytest
import yaml

from tpusim.config.loader import load_model
from tpusim.validation.workloads import WorkloadCase, load_workload_cases, shipped_workload_files

CASES = load_workload_cases()

FILE = re.compile(r"[\w./-]+\.(md|sh|py|yml|yaml)\b")
"""A file named in ``where``: a README, a run script, a config module or a YAML file."""
PLACE = re.compile(r"\blines? \d+|\bcommit [0-9a-f]{7,40}\b|\b[0-9a-f]{7,40}\b")
"""A line number or a commit hash."""

FLOP_TOLERANCE = 0.15
"""MaxText's FLOP count (what TFLOP/s/device divides) differs from 6 x active params x
tokens + causal attention by how its version counted: attention non-causal in some
versions (adds the attention share, 13% for Mistral 7B at 8K tokens, the most in the
set), the embedding lookup, MoE routing (Llama 4 Scout's two logs differ by 11% between
MaxText versions). 15% covers those; a wrong batch, sequence or chip count in a case is
off by 17% or more (one sequence in six per device, 2x for a sequence or slice slip)."""


def _by_id(case: WorkloadCase) -> str:
    return case.id


@pytest.mark.parametrize("case", CASES, ids=_by_id)
def test_where_names_a_file_and_a_line_or_commit(case):
    where = case.spec.where
    assert FILE.search(where), where
    assert PLACE.search(where), where


def _expected_splits(path) -> dict[str, str]:
    """The rule by hand: group by (chip, matmul dtype: quantization else dtype), sort the
    ids as strings, alternate fit, holdout, ... from fit."""
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for case in yaml.safe_load(path.read_text())["cases"]:
        dtype = {"fp8_full": "fp8"}.get(case.get("quantization"), case.get("quantization"))
        groups[(case["chip"], dtype or case["dtype"])].append(case["id"])
    out = {}
    for ids in groups.values():
        out.update({cid: ("fit", "holdout")[i % 2] for i, cid in enumerate(sorted(ids))})
    return out


@pytest.mark.parametrize("path", shipped_workload_files(), ids=lambda p: p.name)
def test_splits_follow_the_rule_written_at_the_top(path):
    data = yaml.safe_load(path.read_text())
    assert data["split_rule"] == "alternate-by-id-within-chip-dtype"
    assert "Split rule" in path.read_text().splitlines()[0]
    want = _expected_splits(path)
    assert {c["id"]: c["split"] for c in data["cases"]} == want


def _model_flops_per_device(case: WorkloadCase) -> float:
    """6 x active parameters x tokens + causal attention (QK and AV, forward and
    backward: 3 x seq x heads x (qk dim + v dim) per token and layer), per device."""
    spec = case.spec
    model = load_model(spec.model)
    att = model.attention
    qk_dim, v_dim = att.head_dim + att.rope_head_dim, att.head_dim
    attention_per_token = 3 * spec.seq * att.heads * (qk_dim + v_dim) * model.layers
    tokens = spec.per_device_batch * spec.seq
    return (6 * model.parameters(active=True) + attention_per_token) * tokens


WITH_TFLOPS = [c for c in CASES if c.spec.measured_tflops_per_device is not None]


@pytest.mark.parametrize("case", WITH_TFLOPS, ids=_by_id)
def test_step_time_times_tflops_matches_the_model_flops(case):
    measured = case.measured_s * case.spec.measured_tflops_per_device * 1e12
    assert measured == pytest.approx(_model_flops_per_device(case), rel=FLOP_TOLERANCE)


def test_flops_by_hand_for_llama3_8b():
    """Llama 3.1 8B, 8192 tokens per device: 6 x 8.03e9 x 8192 + 3 x 8192 x 32 x 256 x
    32 x 8192 (the counter above, written out)."""
    case = next(c for c in CASES if c.id == "v6e-llama3.1-8b-8")
    tokens = case.spec.per_device_batch * case.spec.seq
    want = (6 * 8_030_261_248 + 3 * case.spec.seq * 32 * 256 * 32) * tokens
    assert _model_flops_per_device(case) == pytest.approx(want, rel=1e-12)


def test_a_batch_slip_falls_outside_the_tolerance():
    """The trillium Llama 2 70B log holds 2 sequences per device; written as 3 (its
    tuning_params) the product misses the count by a third."""
    case = next(c for c in CASES if c.id == "v6e-llama2-70b-256")
    measured = case.measured_s * case.spec.measured_tflops_per_device * 1e12
    slipped = _model_flops_per_device(case) * 3 / case.spec.per_device_batch
    assert case.spec.per_device_batch == 2
    assert abs(measured / slipped - 1) > FLOP_TOLERANCE


def test_every_chip_generation_has_runs_and_the_new_sources_ship():
    chips = {c.spec.chip for c in CASES}
    assert {"v4", "v5e", "v5p", "v6e", "ironwood"} <= chips
    new = {"maxtext-v4", "maxtext-v5e", "maxtext-v5p", "tpu-recipes-ironwood-moe"}
    assert new | {"tpu-recipes-v5p-llama4"} <= {c.source for c in CASES}
