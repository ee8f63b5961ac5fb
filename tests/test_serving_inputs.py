"""Bad serving input (issue 22): one line and exit 2 from ``tpusim serve``, from a
scenario's serving workload under ``tpusim check``; the workload takes every option
``tpusim serve`` has; ``tpusim validate --serving`` against the public figures."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import yaml

from tests.helpers import assert_one_error_line, run

SERVE = ("serve", "tpu8i-pod", "--model", "llama-3.1-8b", "--requests", "20")


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--seed", "-1"), "--seed"),
        (("--prompt-tokens", "100000000000000000000"), "over the limit"),
        (("--arrival", "gamma", "--burstiness", "0"), "--burstiness"),
        (("--arrival", "gamma", "--burstiness", "1e200"), "--burstiness"),
        (("--arrival", "gamma", "--burstiness", "1e-200"), "--burstiness"),
        (("--prompt-tokens", "200000"), "context"),
        (("--rate", "1e-20"), "--rate"),
        (("--requests", "1000000000"), "--requests"),
        (("--prompt-tokens", "abc"), "--prompt-tokens"),
        (("--trace", "/nonexistent/trace.csv"), "drop --requests"),  # refused since round 3
        (("--concurrency", "4", "--find-capacity", "--slo-ttft", "1s", "--slo-tpot", "1s"),
         "--concurrency"),
        (("--prompt-tokens", "{uniform: [1, 100000000000]}"), "--prompt-tokens"),
        (("--prefix-tokens", "64", "--prefix-hit-rate", "2"), "--prefix-hit-rate"),
        (("--prefix-hit-rate", "0.5"), "needs --prefix-tokens"),
        (("--prefix-tokens", "-4"), "--prefix-tokens"),
        (("--draft-tokens", "1000"), "--draft-tokens"),
        (("--expert-imbalance", "2"), "--expert-imbalance"),
        (("--draft-tokens", "4", "--acceptance-rate", "1.5"), "--acceptance-rate"),
    ],
)  # fmt: skip
def test_bad_serve_flags_are_one_line(capsys, flags, says):
    line = assert_one_error_line(*run(capsys, *SERVE, *flags))
    assert says in line


def test_a_binary_trace_is_one_line(capsys, tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_bytes(b"arrival_s\x00\xff\xfe\x00")
    line = assert_one_error_line(*run(capsys, *SERVE[:4], "--trace", str(trace)))
    assert "not a text CSV" in line


def test_a_prompt_beyond_the_kv_cache_is_one_line(capsys):
    """Llama 3.1 8B in bf16 on TP 2 of v5e (16 GB chips): the weights leave under
    131,072 tokens of cache, the model's context."""
    argv = ["serve", "v5e-pod", "--model", "llama-3.1-8b", "--tp", "2", "--requests", "5"]
    line = assert_one_error_line(*run(capsys, *argv, "--prompt-tokens", "120000"))
    assert "KV cache" in line


def _scenario(tmp_path, **fields) -> str:
    workload = {"name": "w", "kind": "serving", "model": "llama-3.1-8b", **fields}
    path = tmp_path / "s.yaml"
    path.write_text(
        yaml.safe_dump({"name": "s", "systems": ["tpu8i-pod"], "workloads": [workload]})
    )
    return str(path)


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"prompt_tokens": "abc"}, "prompt_tokens: expected a whole number"),
        ({"seed": -1}, "seed: must be >= 0"),
        ({"requests": "1e9"}, "requests"),
        ({"requests": 10**9}, "requests"),
        ({"burstiness": 1e200, "arrival": "gamma"}, "burstiness"),
        ({"prompt_tokens": 10**20}, "over the limit"),
        ({"disaggregate": "1:x"}, "P:D"),
        ({"trace": "/nonexistent.csv", "rate": 1}, ""),
    ],
)
def test_bad_serving_workloads_are_one_line_under_check(capsys, tmp_path, fields, says):
    path = _scenario(tmp_path, **fields)
    line = assert_one_error_line(*run(capsys, "check", path))
    assert f"{path}:" in line and says in line


def test_serving_workloads_take_block_size_and_disaggregate(tmp_path):
    from tpusim.network import NetworkSettings
    from tpusim.serving.run import check_options
    from tpusim.study.scenario import Scenario
    from tpusim.workloads.serving import options_of

    path = _scenario(tmp_path, block_size=32, disaggregate="1:1", concurrency=None)
    (point,) = Scenario(path).runs
    spec = point.workload
    context = SimpleNamespace(
        system="tpu8i-pod", fidelity="flow", network=NetworkSettings(), power_per_chip_W=None,
        price_per_chip_hour_usd=None,
    )  # fmt: skip
    service = check_options(options_of(spec, context), context.system)
    assert service.service.capacity.block_size == 32  # type: ignore[attr-defined]
    assert (service.prefill, service.decode) == (1, 1)  # type: ignore[attr-defined]


def test_the_figures_follow_the_files_fit_holdout_rule():
    """The rule written in each file, the training set's: within the file, per (chip,
    weights' dtype) the figures sorted by id alternate fit, holdout, ... from fit."""
    from tpusim.validation.serving_figures import load_figures, shipped_files

    assert len(shipped_files()) >= 4 and len(load_figures()) >= 30
    groups: dict[tuple[str, str, str], list] = {}
    for path in shipped_files():
        for f in load_figures([path]):
            groups.setdefault((path.name, f.chip, f.weight_dtype), []).append(f)
    for members in groups.values():
        members.sort(key=lambda f: f.id)
        assert [f.split for f in members] == [
            ("fit", "holdout")[i % 2] for i in range(len(members))
        ]


def test_validate_serving_median_error_within_10pct_with_throughput_and_tpot(capsys):
    """Issue 32's bound on the v6e figures it was set on (the Ironwood and v5e files of
    issue 41 wait for the profiles' refit), with fit and holdout apart."""
    v6e = "configs/measurements/serving/vllm-tpu-v6e.yaml"
    code, out, err = run(capsys, "validate", "--serving", "--measurements", v6e, "--json")
    assert code == 0, err
    record = json.loads(out)
    assert record["median_abs_error"] <= 0.10
    assert record["fit"]["total"] + record["holdout"]["total"] == record["total"]
    metrics = {c["metric"] for c in record["cases"]}
    assert {"output_tokens_per_s", "tpot_median_s"} <= metrics
    assert record["metrics"]["output_tokens_per_s"]["median_abs_error"] <= 0.15
    assert record["metrics"]["tpot_median_s"]["median_abs_error"] <= 0.15
    assert record["holdout"]["total"] > 0


def test_each_figure_runs_on_the_slice_it_ran_on():
    """The TP-8 70B recipe ran on a v6e-8 (2x4, no wraparound), the 8B on a v6e-1,
    Qwen3-Coder on an Ironwood 2x2x1 (4 chips, TP 8 devices) and on a 2x2x2 (two hosts, 8
    chips, TP 16 devices), JetStream's Llama 2 7B on a v5e-8: the simulated system is that
    slice, with the replica on all of its chips."""
    from tpusim.validation.serving import Simulator, shipped_overheads
    from tpusim.validation.serving_figures import figure_system, load_figures

    simulator = Simulator()
    for figure in load_figures():
        system = figure_system(figure)
        assert system.num_chips == figure.slice.chips == figure.tp
        published = {"v6e-1": 1, "v6e-4": 4, "v6e-8": 8, "v5e-8": 8}
        published |= {"tpu7x-2x2x1": 4, "tpu7x-2x2x2": 8}
        assert system.num_chips == published[figure.slice.name]
        if figure.chip == "v6e":
            assert system.wraparound == (False,) * len(figure.slice.dims)
        service = simulator.service(figure, shipped_overheads(figure))
        assert service.chips == figure.tp


def test_fit_needs_serving(capsys):
    line = assert_one_error_line(*run(capsys, "validate", "--fit"))
    assert "--serving" in line
