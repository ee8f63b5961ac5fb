"""The model presets added for the whole-model validation table (llama2-70b, mistral-7b,
gpt3-175b, mixtral-8x22b): counts against the published figures and by hand."""

from __future__ import annotations

import pytest

from tpusim.config.loader import load_model

PRESETS = ("llama2-70b", "mistral-7b", "gpt3-175b", "mixtral-8x22b")


@pytest.mark.parametrize("name", PRESETS)
def test_total_parameters_match_the_published_count_within_1pct(name):
    model = load_model(name)
    assert model.parameters() == pytest.approx(model.published.parameters, rel=0.01)


def test_gpt3_counts_by_hand():
    """96 x (attention 4 x 12288^2, plain MLP 2 x 12288 x 49152, norms 2 x 12288) + one
    tied 50304 x 12288 embedding + the final norm."""
    layer = 4 * 12288**2 + 2 * 12288 * 49152 + 2 * 12288
    assert load_model("gpt3-175b").parameters() == 96 * layer + 50304 * 12288 + 12288


def test_mixtral_8x22b_active_parameters_match_39b():
    """Per layer: GQA attention 6144 x (48 + 16) x 128 + 48 x 128 x 6144, two of eight
    SwiGLU experts of 3 x 6144 x 16384, the router 6144 x 8, norms; two embeddings."""
    attention = 6144 * 64 * 128 + 48 * 128 * 6144
    layer = attention + 2 * 3 * 6144 * 16384 + 6144 * 8 + 2 * 6144
    expected = 56 * layer + 2 * 32768 * 6144 + 6144
    model = load_model("mixtral-8x22b")
    assert model.parameters(active=True) == expected
    assert expected == pytest.approx(model.published.active_parameters, rel=0.01)
