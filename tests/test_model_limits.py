"""A model file past the limits is one line where it is read (issue 45, leftovers of
round three): 2^31 experts gave a pydantic traceback in ``serve`` and ``plan`` (the
file's bound was 2^31, the shape's MAX_EXPERTS), and 2^31 layers made ``plan`` walk
every layer of every candidate for ever (MAX_LAYERS)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from helpers import assert_one_error_line, run

from tpusim.config.limits import MAX_EXPERTS, MAX_LAYERS

BOUND = "Input should be less than or equal to"
MIXTRAL = Path(__file__).resolve().parents[1] / "configs" / "models" / "mixtral-8x7b.yaml"


def _model(tmp_path: Path, old: str, new: str) -> str:
    text = MIXTRAL.read_text()
    assert old in text
    path = tmp_path / "m.yaml"
    path.write_text(text.replace(old, new))
    return str(path)


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        ("moe: {experts: 8,", "moe: {experts: 2147483648,", f"moe.experts: {BOUND} {MAX_EXPERTS}"),
        ("\nlayers: 32\n", "\nlayers: 2147483648\n", f"layers: {BOUND} {MAX_LAYERS}"),
    ],
)
def test_a_model_file_past_the_limits_is_one_line_in_serve_and_plan(
    tmp_path, capsys, old, new, words
):
    model = _model(tmp_path, old, new)
    for argv in (
        ["serve", "v5p-pod", "--model", model],
        ["plan", model, "v5p-pod", "--global-batch", "1024", "--seq", "4096"],
    ):
        began = time.perf_counter()
        line = assert_one_error_line(*run(capsys, *argv))
        assert time.perf_counter() - began < 10
        assert "m.yaml" in line and words in line, line
