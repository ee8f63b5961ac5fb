"""``tpusim compile``: its inputs checked without JAX, the one line it prints without
the xla extra, and (marked ``xla``, skipped without JAX) a real compile for a TPU
topology replayed with no unknown op."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import assert_one_error_line, run

from tpusim.compile import NEEDS_EXTRA, make_request
from tpusim.compile.request import parse_mesh, resolve_topology
from tpusim.errors import InputError

TINY = str(Path(__file__).parent / "fixtures" / "compiled" / "tiny-dense.yaml")


def test_without_the_extra_one_line_and_exit_2(capsys, monkeypatch):
    monkeypatch.setattr("tpusim.cli.compile.has_xla", lambda: False)
    line = assert_one_error_line(*run(capsys, "compile", TINY, "--topology", "v5e:2x2"))
    assert line == f"tpusim: error: {NEEDS_EXTRA}"


@pytest.mark.parametrize(
    ("name", "resolved"),
    [
        ("v5e:4x4", "v5e:4x4"),
        ("v5p:2x2x2", "v5p:2x2x2"),
        ("tpu7x:2x2x1", "tpu7x:2x2x1"),
        ("v5e-pod", "v5e:4x4"),  # a shipped system: its chip's family, a small slice
        ("ironwood-256", "tpu7x:2x2x1"),
        ("v6e-pod:2x2", "v6e:2x2"),
    ],
)
def test_topologies_by_libtpu_name_or_system(name, resolved):
    assert resolve_topology(name) == resolved


def test_tpu7x_has_two_devices_per_chip():
    """libtpu lists tpu7x:2x2x1 as 8 devices on 4 chips (Ironwood's 2 TensorCores)."""
    request = make_request(TINY, "tpu7x:2x2x1")
    assert request.num_devices == 8
    assert request.mesh == {"data": 1, "fsdp": 8, "expert": 1, "tensor": 1}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: resolve_topology("v9:4x4"), "expected FAMILY:SHAPE"),
        (lambda: resolve_topology("v5e:4by4"), "is not like 4x4"),
        (lambda: resolve_topology("tpu8i-pod"), "libtpu does not compile for"),
        (lambda: parse_mesh("fsdp=3", 16), "multiply to 3, the slice has 16"),
        (lambda: parse_mesh("model=4", 16), "'model=4' is not ROLE=N"),
        (lambda: make_request(TINY, "v5e:2x2", "fsdp=2,tensor=2", batch=3), "multiple of"),
        (lambda: make_request(TINY, "v5e:2x2", layers=0), "--layers 0"),
        (lambda: make_request("deepseek-v3", "v5e:2x2"), "GQA only"),
    ],
)
def test_bad_requests_are_named(call, message):
    with pytest.raises(InputError, match=message):
        call()


def test_the_mesh_fills_fsdp_with_what_is_left():
    assert parse_mesh("tensor=4", 16) == {"data": 1, "fsdp": 4, "expert": 1, "tensor": 4}


@pytest.mark.xla
def test_a_compile_replays_with_no_unknown_op(tmp_path):
    """Compile the tiny dense model for v5e:2x2 with libtpu and replay the artifact:
    every op known, tpusim's FLOPs (loop bodies once) within 5% of XLA's."""
    from tpusim.compile import compile_to
    from tpusim.program.hlo.artifact import load_compiled
    from tpusim.workloads.hlo import hlo_summary

    out = tmp_path / "tiny.json.gz"
    request = make_request(TINY, "v5e:2x2", "fsdp=2,tensor=2", seq=128)
    fields = compile_to(request, out)
    assert fields["mesh"]["shape"] == [1, 2, 1, 2]
    module, _, artifact = load_compiled(out)
    assert module.flops(loop_trip_counts=False) == pytest.approx(
        artifact.cost_analysis["flops"], rel=0.05
    )
    assert artifact.memory_analysis["peak_memory_in_bytes"] > 0
    assert hlo_summary(str(out), "v5e-pod", "analytic")["unknown_ops"] == {}


@pytest.mark.xla
def test_the_cli_compiles_a_decode_step(capsys, tmp_path):
    out = tmp_path / "decode.json.gz"
    code, stdout, _ = run(
        capsys,
        "compile",
        TINY,
        "--topology",
        "v6e:2x2",
        "--step",
        "decode",
        "--batch",
        "4",
        "--out",
        str(out),
        "--json",
    )
    assert code == 0 and out.exists()
    assert '"step": "decode"' in stdout


def test_what_libtpu_raises_is_one_line():
    """libtpu refusing the request (INVALID_ARGUMENT) is bad input, exit 2; anything
    else it raises is a failed compile, exit 1; only the first line of its message."""
    from tpusim.compile.request import libtpu_error

    request = make_request(TINY, "v5e:2x2")
    refused = libtpu_error(request, RuntimeError("INVALID_ARGUMENT: bad layout\nmore"))
    assert isinstance(refused, InputError) and refused.exit_code == 2
    assert str(refused) == "compile tiny-dense for v5e:2x2: libtpu: INVALID_ARGUMENT: bad layout"
    failed = libtpu_error(request, RuntimeError("ABORTED: lock"))
    assert not isinstance(failed, InputError) and failed.exit_code == 1


@pytest.mark.xla
def test_a_topology_libtpu_refuses_is_one_line(capsys, tmp_path):
    out = tmp_path / "x.json.gz"
    line = assert_one_error_line(
        *run(capsys, "compile", TINY, "--topology", "v5e:3x5", "--out", str(out))
    )
    assert "libtpu: INVALID_ARGUMENT" in line


def test_shared_experts_are_one_dense_mlp_beside_the_routed_ones():
    """Llama 4 Scout: 16 routed experts of width 8192 and 1 shared one: the shared
    expert's gated MLP is d_model x 8192 (twice) and 8192 x d_model per layer."""
    from tpusim.compile.shapes import param_shapes

    request = make_request("llama4-scout", "v5e:2x2", layers=2)
    shapes = param_shapes(request)
    d = request.model.d_model
    assert shapes["swi0"] == shapes["swi1"] == (2, d, 8192)
    assert shapes["swout"] == (2, 8192, d)
    assert shapes["ewi0"] == (2, 16, d, 8192)


@pytest.mark.parametrize(
    ("topology", "name"),
    [
        ("v5e:4x4", "v5e-16"),
        ("v6e:16x16", "v6e-256"),
        ("v5p:2x2x2", "v5p-16"),
        ("tpu7x:4x4x4", "tpu7x-128"),
        ("v4:2x2x1", "v4-8"),
    ],
)
def test_maxtext_names_slices_by_chips_or_tensorcores(topology, name):
    """MaxText's accelerator_to_spec_map: v5p-16 is v5:2x2x2, tpu7x-128 is 4x4x4 (the
    tpu-recipes Ironwood 70B recipe's slice), v5e-16 is 4x4."""
    from tpusim.compile.maxtext import maxtext_topology

    assert maxtext_topology(topology) == name


def test_maxtext_path_errors_are_one_line(capsys, tmp_path):
    both = run(capsys, "compile", TINY, "--maxtext", "model_name=x", "--topology", "v5e:2x2")
    assert "one of them" in assert_one_error_line(*both)
    missing = run(
        capsys,
        "compile",
        "--maxtext",
        "model_name=llama2-7b",
        "--topology",
        "v5e:2x2",
        "--maxtext-python",
        str(tmp_path / "no-python"),
        "--out",
        str(tmp_path / "m.json.gz"),
    )
    assert "--maxtext-python" in assert_one_error_line(*missing)
