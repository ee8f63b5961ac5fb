"""A Hugging Face ``config.json`` as a model (issue 41): read through the one model
loader into the preset schema, its parameters counted by hand or against the published
count, refused naming the key it cannot express, and taken by ``serve`` and ``plan``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import assert_one_error_line, run
from tpusim.config.loader import load_model
from tpusim.errors import ConfigError

HF = Path(__file__).parent / "fixtures" / "hf"


def test_llama_31_8b_config_counts_the_published_8_03b():
    """meta-llama/Llama-3.1-8B's config.json (its published values) gives the model
    card's 8.03B parameters and the shipped preset's shape."""
    model = load_model(str(HF / "llama-3.1-8b" / "config.json"))
    assert model.parameters() == pytest.approx(8.03e9, rel=1e-3)
    assert model.builder_fields() == load_model("llama-3.1-8b").builder_fields()
    assert model.context_length == 131072 and model.published is None


def test_a_tiny_moe_config_counts_by_hand():
    """d 64, 2 layers, 4 heads of 16 (2 KV), 8 experts of width 32, top 2, vocab 100:
    attention 3 x 4,096 = 12,288; experts 8 x 3 x 64 x 32 = 49,152; router 512;
    norms 128 per layer; embeddings 2 x 6,400; final norm 64."""
    model = load_model(str(HF / "tiny-moe" / "config.json"))
    layer, active_layer = 12288 + 49152 + 512 + 128, 12288 + 2 * 6144 + 512 + 128
    assert model.parameters() == 2 * layer + 12800 + 64 == 137024
    assert model.parameters(active=True) == 2 * active_layer + 12800 + 64
    assert (model.moe.experts, model.moe.top_k, model.moe.d_ff) == (8, 2, 32)


def test_a_tiny_mla_config_counts_by_hand():
    """DeepSeek-V3-style: d 64, 4 heads of 12 (+8 RoPE), q rank 24, kv rank 16; one
    dense layer (d_ff 96), two MoE layers of 4 routed + 1 shared experts of width 16.
    MLA: 1,536 + 1,920 + 1,536 + 1,536 + 3,072 + 40 = 9,640 per layer."""
    model = load_model(str(HF / "tiny-mla" / "config.json"))
    attention = 64 * 24 + 24 * 4 * 20 + 64 * 24 + 2 * 16 * 48 + 48 * 64 + 24 + 16
    dense = attention + 3 * 64 * 96 + 128
    moe = attention + 5 * 3 * 64 * 16 + 64 * 4 + 128
    assert model.attention.kind == "mla" and model.moe.dense_layers == 1
    assert model.parameters() == dense + 2 * moe + 2 * 50 * 64 + 64


def test_zero_shared_experts_and_dense_layers_read_as_none(tmp_path):
    path = _config(tmp_path, n_shared_experts=0, first_k_dense_replace=0)
    model = load_model(path)
    assert (model.moe.shared, model.moe.dense_layers) == (0, 0)
    assert model.parameters() == 137024  # as without the keys


def _config(tmp_path: Path, **changes) -> str:
    data = json.loads((HF / "tiny-moe" / "config.json").read_text())
    data.update(changes)
    data = {k: v for k, v in data.items() if v is not None}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"quantization_config": {"quant_method": "awq", "bits": 4}}, "quantization_config"),
        ({"quantization_config": "fp8"}, "quantization_config"),
        ({"text_config": {"hidden_size": 64}}, "text_config"),
        ({"decoder_sparse_step": 2}, "decoder_sparse_step"),
        ({"mlp_only_layers": [0]}, "mlp_only_layers"),
        ({"torch_dtype": "int8"}, "torch_dtype"),
        ({"hidden_size": None}, "hidden_size"),
        ({"num_hidden_layers": 2.5}, "num_hidden_layers"),
        ({"num_experts_per_tok": None}, "num_experts_per_tok"),
    ],
)
def test_what_a_preset_cannot_express_is_refused_naming_the_key(tmp_path, changes, key):
    path = _config(tmp_path, **changes)
    with pytest.raises(ConfigError, match=rf"config\.json {key}:"):
        load_model(path)


def test_a_bad_config_is_one_line_from_serve(capsys, tmp_path):
    path = _config(tmp_path, quantization_config={"quant_method": "gptq"})
    line = assert_one_error_line(*run(capsys, "serve", "tpu8i-pod", "--model", path))
    assert "quantization_config: quant_method 'gptq': tpusim reads fp8" in line


def test_not_json_is_one_line(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text("{not json")
    line = assert_one_error_line(*run(capsys, "serve", "tpu8i-pod", "--model", str(path)))
    assert "not a JSON config.json" in line


def test_serve_and_plan_take_a_config_json(capsys):
    path = str(HF / "llama-3.1-8b" / "config.json")
    code, out, err = run(capsys, "serve", "tpu8i-pod", "--model", path, "--requests", "5",
                         "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["weights_bytes_per_chip"] == pytest.approx(2 * 8030261248, rel=0.01)
    code, out, err = run(capsys, "plan", path, "v5e-pod", "--global-batch", "64", "--seq", "2048",
                         "--layers", "2", "--top", "1", "--shortlist", "2", "--confirm", "1",
                         "--rank-fidelity", "analytic", "--confirm-fidelity", "analytic",
                         "--json")  # fmt: skip
    assert code == 0, err


def test_an_fp8_checkpoint_is_served_as_stored(capsys):
    """quant_method fp8 (the Qwen and DeepSeek fp8 releases' config): the weights are
    served in fp8 unless the run gives --dtype. Per chip, by hand (d 64, 2 layers, 4
    heads of 16, d_ff 128 gated, vocab 100): layers 2 x (4 x 64 x 64 + 3 x 64 x 128) =
    81,920 weights at 1 byte; embedding and LM head 2 x 100 x 64 and 5 norms of 64 in
    bf16, 26,240 bytes: 108,160 bytes (bf16 layers: 190,080)."""
    argv = ("serve", "tpu8i-pod", "--tp", "1", "--requests", "5", "--json", "--model")
    fp8 = str(HF / "tiny-fp8" / "config.json")
    assert load_model(fp8).checkpoint_dtype == "fp8"
    assert load_model(str(HF / "tiny-dense" / "config.json")).checkpoint_dtype is None
    code, out, err = run(capsys, *argv, fp8)
    assert code == 0, err
    row = json.loads(out)
    assert (row["dtype"], row["weights_bytes_per_chip"]) == ("fp8", 108_160)
    code, out, err = run(capsys, *argv, fp8, "--dtype", "bf16")
    assert code == 0, err
    assert (json.loads(out)["dtype"], json.loads(out)["weights_bytes_per_chip"]) == (
        "bf16",
        190_080,
    )
