"""A MaxText line pasted as a training step (issue 42): ``tpusim step SYSTEM --maxtext
LINE`` and ``tpusim.training_step(system, maxtext=LINE)``.

Oracles: the tpu-recipes Ironwood Llama 3.1 70B recipe's published step (12.20 s,
``training/ironwood/README.md`` line 20) and XLA's own compiled program of the same line
replayed by ``tpusim hlo`` (a second path to the step: the compiler's program, not
tpusim's reconstruction); MaxText's defaults (``base.yml``) and the mesh arithmetic
counted by hand."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import tpusim
from tpusim.config.loader import load_system
from tpusim.errors import InputError
from tpusim.results.records import TrainingRecord
from tpusim.validation.maxtext_run import maxtext_overrides, maxtext_run
from tpusim.workloads.hlo import hlo_summary

ROOT = Path(__file__).resolve().parent.parent
COMPILED = ROOT / "configs" / "measurements" / "compiled"
#: The recipe's MaxText arguments verbatim (tpu-recipes training/ironwood/llama3.1-70b/
#: 8k-bf16-tpu7x-4x4x4 run_recipe.sh MAXTEXT_ARGS, as its compiled record keeps them).
RECIPE = json.loads((COMPILED / "iw-llama3.1-70b-64-bf16.json").read_text())["maxtext"]
PUBLISHED_STEP_S = 12.20
SLICE = """\
name: tpu7x-4x4x4
description: "an Ironwood 4x4x4 slice (the recipe's)"
chip: ironwood
topology: {kind: torus, dims: [4, 4, 4]}
"""


@pytest.fixture(scope="module")
def slice_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("maxtext") / "tpu7x-4x4x4.yaml"
    path.write_text(SLICE)
    return str(path)


def _step(system: str, line: str) -> TrainingRecord:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tpusim.training_step(system, maxtext=line)


def test_recipe_line_reads_as_the_recipe(slice_file: str) -> None:
    """128 devices (64 chips x 2 TensorCores) x 2 sequences = 256; FSDP over every
    chip; the custom policy's tensors kept on the device; the kernel flags named."""
    run = maxtext_run(
        f"python3 -m maxtext.trainers.pre_train.train base.yml {RECIPE}", load_system(slice_file)
    )
    assert run.fields["batch"] == 256
    assert run.fields["seq"] == 8192
    assert run.fields["mesh"] == {"fsdp": 64}
    assert run.fields["remat_policy"] == "custom"
    assert run.fields["remat_tensors"] == {
        t: "device"
        for t in ("decoder_layer_input", "context", "query_proj", "key_proj", "value_proj")
    }
    assert run.fields["attention_kernel"] == "flash"
    assert {"sa_block_q", "mu_dtype", "use_tokamax_splash"} <= set(run.not_modelled)
    assert "ici_fsdp_parallelism" not in run.not_modelled


def test_recipe_line_step_against_published_and_xla(slice_file: str) -> None:
    """The line's step within 15% of the published one, and of XLA's compiled program
    of the same line replayed on the same slice (issue 42's must-hold)."""
    step = _step(slice_file, RECIPE).step_time_s
    assert abs(step / PUBLISHED_STEP_S - 1) <= 0.15
    replay = hlo_summary(str(COMPILED / "iw-llama3.1-70b-64-bf16.json.gz"), slice_file, "analytic")[
        "step_time_s"
    ]
    assert abs(step / replay - 1) <= 0.15


def test_defaults_are_maxtexts() -> None:
    """model_name alone: MaxText's base.yml gives 12 sequences per device, 2,048 tokens,
    bf16, full remat, FSDP over every device: 12 x 256 v5e chips = 3,072 sequences."""
    run = maxtext_run("model_name=llama3.1-8b", load_system("v5e-pod"))
    assert run.fields == {
        "model": "llama-3.1-8b",
        "seq": 2048,
        "batch": 12 * 256,
        "dtype": "bf16",
        "mesh": {"fsdp": 256},
        "remat_policy": "full",
    }


def test_slices_are_maxtext_dcn_data() -> None:
    """Four Ironwood slices of 256 chips: DCN data parallelism over the slices
    (MaxText's dcn_data_parallelism: -1), 4 x 256 x 2 devices x 12 sequences."""
    run = maxtext_run("model_name=llama3.1-70b", load_system("ironwood-multislice"))
    assert run.fields["mesh"] == {"data": 4, "fsdp": 256}
    assert run.fields["batch"] == 4 * 256 * 2 * 12


def test_tensor_axis_takes_devices_from_fsdp() -> None:
    """ici_tensor_parallelism=4 on 256 v5e chips: FSDP takes the other 64, and
    MaxText's tensor axis shards the residual stream (sequence parallelism)."""
    run = maxtext_run("model_name=llama3.1-8b ici_tensor_parallelism=4", load_system("v5e-pod"))
    assert run.fields["mesh"] == {"fsdp": 64, "tensor": 4}
    assert run.fields["sequence_parallel"] is True


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("model_name=llama9", "model_name=llama9: no tpusim preset"),
        ("per_device_batch_size=2", "model_name is missing"),
        ("model_name=llama3.1-8b dtype=bfloat16 dtype=float32", "dtype is given twice"),
        ("model_name=llama3.1-8b per_device_batch_size=0.3", "not a whole number"),
        ("model_name=llama3.1-8b per_device_batch_size=.inf", "not a whole number"),
        ("model_name=llama3.1-8b per_device_batch_size=-2", "not a whole number"),
        ("model_name=llama3.1-8b per_device_batch_size=1e300", "over the limit"),
        ("model_name=llama3.1-8b max_target_length=4096.5", "max_target_length: "),
        ("model_name=llama3.1-8b ici_foo_parallelism=2", "unknown MaxText mesh axis 'foo'"),
        ("model_name=llama3.1-8b ici_tensor_parallelism=3", "do not divide"),
        ("model_name=llama3.1-8b stray", "'stray' is not key=value"),
        ("python3 train.py", "no key=value"),
        ("model_name=llama3.1-8b remat_policy=sometimes", "remat_policy"),
    ],
)
def test_bad_lines_name_the_key(line: str, needle: str) -> None:
    with pytest.raises(InputError) as info:
        maxtext_run(line, load_system("v5e-pod"))
    assert needle in str(info.value), str(info.value)


def test_values_are_yaml_scalars() -> None:
    keys = maxtext_overrides("a=-1 b=True c=2.5 d=bfloat16 e='x y'")
    assert keys == {"a": -1, "b": True, "c": 2.5, "d": "bfloat16", "e": "x y"}


def test_cli_warns_once_and_refuses_in_one_line(slice_file: str) -> None:
    """The command: the step on stdout, the keys not modelled in one stderr line; a
    bad line is one line and exit 2."""
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "tpusim",
            "step",
            slice_file,
            "--maxtext",
            "model_name=llama3.1-8b per_device_batch_size=1 sa_block_q=1024 steps=20",
            "--fidelity",
            "analytic",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    warning = [line for line in ok.stderr.splitlines() if line.strip()]
    assert warning == ["tpusim: warning: maxtext: not modelled: sa_block_q steps"]
    row = json.loads(ok.stdout)
    lo, hi = row["step_time_s_interval"]
    assert lo < row["step_time_s"] < hi
    bad = subprocess.run(
        [sys.executable, "-m", "tpusim", "step", slice_file, "--maxtext", "model_name=x"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1
    assert "model_name=x" in bad.stderr
