"""Model presets (configs/models): counts against the published figures, the KV-cache
arithmetic, ``tpusim models`` and ``model:`` on workloads."""

from __future__ import annotations

import json

import pytest
from helpers import assert_one_error_line, run

from tpusim.config.loader import load_model, shipped
from tpusim.errors import ConfigError

PRESETS = ("llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "deepseek-v3", "mixtral-8x7b")


def test_the_issue_presets_ship():
    assert set(PRESETS) <= set(shipped("models"))


@pytest.mark.parametrize("name", PRESETS)
def test_total_parameters_match_the_published_count_within_1pct(name):
    model = load_model(name)
    assert model.parameters() == pytest.approx(model.published.parameters, rel=0.01)


def test_mixtral_active_parameters_match_12_9b():
    assert load_model("mixtral-8x7b").parameters(active=True) == pytest.approx(12.9e9, rel=0.01)


def test_deepseek_v3_active_parameters_match_37b_to_its_two_digits():
    """DeepSeek publishes "37B activated" (two significant digits). Counting both
    embedding matrices, as Mixtral's 12.9B does, gives 37.55B: 1.5% over, inside
    the 36.5-38 band that rounds to 37 or 38 at two digits."""
    active = load_model("deepseek-v3").parameters(active=True)
    assert 36.5e9 <= active < 38.0e9
    assert active == pytest.approx(37e9, rel=0.02)


def test_dense_llama_counts_by_hand():
    """Llama 3.1 8B from its config by hand: 32 x (attention 4096 x (32+16) x 128 +
    32 x 128 x 4096, MLP 3 x 4096 x 14336, norms 2 x 4096) + 2 x 128256 x 4096 + 4096."""
    attention = 4096 * 48 * 128 + 32 * 128 * 4096
    layer = attention + 3 * 4096 * 14336 + 2 * 4096
    expected = 32 * layer + 2 * 128256 * 4096 + 4096
    assert load_model("llama-3.1-8b").parameters() == expected == 8_030_261_248


def test_mla_attention_counts_by_hand():
    """DeepSeek-V3's MLA projections from its config.json shapes."""
    q_a, q_b = 7168 * 1536, 1536 * 128 * (128 + 64)
    kv_a, kv_b = 7168 * (512 + 64), 512 * 128 * (128 + 128)
    out = 128 * 128 * 7168
    expected = q_a + q_b + kv_a + kv_b + out + 1536 + 512
    assert load_model("deepseek-v3").attention_parameters() == expected


@pytest.mark.parametrize(
    ("name", "per_token_bf16"),
    [
        ("llama-3.1-70b", 80 * 2 * 8 * 128 * 2),  # 320 KiB per token: K and V, 8 KV heads
        ("llama-3.1-8b", 32 * 2 * 8 * 128 * 2),  # 128 KiB
        ("deepseek-v3", 61 * (512 + 64) * 2),  # the latent and the RoPE key: 70,272 B
    ],
)
def test_kv_cache_bytes_per_token(name, per_token_bf16):
    assert load_model(name).kv_cache_bytes_per_token(2) == per_token_bf16


def test_models_json_lists_every_preset(capsys):
    code, out, _ = run(capsys, "models", "--json")
    assert code == 0
    rows = {r["name"]: r for r in json.loads(out)["models"]}
    assert set(PRESETS) <= set(rows)
    for row in rows.values():
        for key in ("parameters", "active_parameters", "layers", "d_model"):
            assert isinstance(row[key], int)
    assert rows["deepseek-v3"]["dense_layers"] == 3 and rows["deepseek-v3"]["experts"] == 256


def test_models_text_table(capsys):
    code, out, _ = run(capsys, "models")
    assert code == 0 and "llama-3.1-405b" in out and "405.85B" in out


def test_unknown_model_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown model 'gpt-9'"):
        load_model("gpt-9")


def test_bad_preset_file_names_file_and_path(tmp_path):
    path = tmp_path / "m.yaml"
    text = load_model("llama-3.1-8b").model_dump_json(by_alias=True)
    data = json.loads(text)
    data["attention"]["kv_heads"] = 5  # does not divide 32 heads
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"kv_heads \(5\) must divide heads \(32\)") as exc:
        load_model(str(path))
    assert str(path) in str(exc.value)


SCENARIO = "name: m\nsystems: [v5e-pod]\nworkloads:\n"


def test_workload_model_fills_the_shape_and_explicit_fields_override():
    from typing import Literal

    from tpusim.workloads.spec import ModelWorkload

    class Shape(ModelWorkload):  # a kind that models every preset field
        kind: Literal["shape"] = "shape"
        kv_heads: int | None = None
        vocab: int = 0
        mlp: str = "plain"
        attention: str = "gqa"
        q_lora_rank: int = 0
        kv_lora_rank: int = 0
        rope_head_dim: int = 0
        experts: int = 0
        top_k: int = 2
        expert_d_ff: int | None = None
        shared_experts: int = 0
        dense_layers: int = 0

    spec = Shape.model_validate(
        {"name": "s", "model": "deepseek-v3", "layers": 4, "mesh": {"data": "auto"}}
    )
    assert (spec.layers, spec.d_model, spec.d_ff, spec.heads, spec.vocab) == (
        4,
        7168,
        18432,
        128,
        129280,
    )
    assert (spec.attention, spec.kv_lora_rank, spec.experts, spec.dense_layers) == (
        "mla",
        512,
        256,
        3,
    )
    assert "model" not in spec.builder_fields()


@pytest.mark.parametrize(
    ("workload", "match"),
    [
        ("model: gpt-9,", r"workloads\[0\].*unknown model 'gpt-9'"),
    ],
)
def test_bad_model_field_is_one_line(tmp_path, capsys, workload, match):
    path = tmp_path / "s.yaml"
    path.write_text(
        SCENARIO + f"  - {{name: d, kind: decode_step, {workload} batch: 1, context: 128,"
        " mesh: {replica: auto}}\n"
    )
    line = assert_one_error_line(
        *run(capsys, "run", str(path), "--out", str(tmp_path / "o"), "--quiet")
    )
    assert __import__("re").search(match, line), line


def test_fragments_of_a_preset_are_labelled_and_whole_models_are_not(tmp_path, capsys):
    """A decode step of 2 of Llama 3.1 8B's 32 layers says so on its token figures."""
    path = tmp_path / "s.yaml"
    path.write_text(
        SCENARIO.replace("v5e-pod", "ironwood-256")
        + "  - {name: part, kind: decode_step, model: llama-3.1-8b, layers: 2, dtype: fp8,"
        " batch: 1, context: 128, mesh: {replica: auto}}\n"
        "  - {name: whole, kind: decode_step, model: llama-3.1-8b, dtype: fp8,"
        " batch: 1, context: 128, mesh: {replica: auto}}\n"
    )
    code, out, err = run(
        capsys, "run", str(path), "--json", "--quiet", "--jobs", "1", "--out", str(tmp_path / "o")
    )
    assert code == 0, err
    record = json.loads(out)
    rows = {r["workload"]: r for r in record["results"]}
    assert rows["part"]["fragment"] == "fragment: 2 of 32 layers"
    assert rows["whole"].get("fragment") is None
    figures = set(record["comparison"]["ironwood-256"])
    assert "part: tokens/s per chip (fragment: 2 of 32 layers)" in figures
    assert "whole: tokens/s per chip" in figures
    # 30 more layers take longer: the whole model is no fragment of itself
    assert rows["whole"]["step_time_s"] > 5 * rows["part"]["step_time_s"]


def test_serving_claim_from_capacities():
    """The perf-per-dollar claim row appears once per serving workload with both
    capacities, and its ratio is theirs."""
    from tpusim.study.claims import claim_rows

    rows = [
        {
            "system": "tpu8i-pod",
            "kind": "serving",
            "workload": "w",
            "capacity_rate_per_s_per_chip": 9.0,
        },
        {
            "system": "ironwood-pod",
            "kind": "serving",
            "workload": "w",
            "capacity_rate_per_s_per_chip": 5.0,
        },
    ]
    (claim,) = claim_rows(rows, checks={"perf_per_dollar"})
    assert "80% better performance per dollar" in claim["claim"]
    assert "(1.80x)" in claim["tpusim"]
    assert claim_rows(rows[:1], checks={"perf_per_dollar"}) == []
