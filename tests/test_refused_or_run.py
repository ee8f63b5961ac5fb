"""Valid inputs run and nonsense is refused (issue 45, item 6): relative paths in a jobs
workload's ``serve:`` entries resolve against the scenario file; a server profile for a
chip that does not exist, ``--jobs``/``--approximate``/``--fidelity packet`` where they
do nothing, ``remat_policy`` against ``recompute: false`` are one line (exit 2); and
``plots: false`` writes no figure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from helpers import assert_one_error_line, run

REPO = Path(__file__).resolve().parents[1]


def _jobs_with_relative_serve(folder: Path, plots: bool = False) -> Path:
    sub = folder / "sub"
    sub.mkdir()
    (sub / "m.yaml").write_text((REPO / "configs" / "models" / "llama-3.1-8b.yaml").read_text())
    server = (REPO / "configs" / "servers" / "vllm-tpu-torchxla.yaml").read_text()
    (sub / "srv.yaml").write_text(server)
    (sub / "t.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0,128,4\n0.01,128,4\n")
    scenario = sub / "s.yaml"
    scenario.write_text(
        f"name: rel\nsystems: [ironwood-256]\nplots: {str(plots).lower()}\nworkloads:\n"
        "  - name: shared\n    kind: jobs\n    jobs:\n"
        "      - {name: t, chips: [0, 1], collective: {op: all-reduce, bytes: 1 MiB}}\n"
        "      - {name: chat, serve: {model: m.yaml, server: ./srv.yaml, trace: t.csv, tp: 1}}\n"
    )
    return scenario


def test_relative_serve_paths_resolve_against_the_scenario(tmp_path, capsys, monkeypatch):
    scenario = _jobs_with_relative_serve(tmp_path)
    monkeypatch.chdir(tmp_path)  # not the scenario's folder
    code, out, err = run(capsys, "run", "sub/s.yaml", "--json", "--out", "o")
    assert code == 0, err
    (result,) = json.loads(out)["results"]
    chat = result["jobs"][1]
    assert chat["requests"] == 2 and chat["completed"] == 2  # the trace's two rows
    assert not list((tmp_path / "o").glob("*.png"))  # plots: false: no jobs heatmap
    assert scenario.exists()


def test_a_server_profile_for_a_chip_that_does_not_exist_is_refused(tmp_path, capsys):
    text = (REPO / "configs" / "servers" / "vllm-tpu-torchxla.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    own = "chips:\n  v99:\n    hbm_efficiency: {value: 0.6, grade: assumption, note: typo}\n"
    bad.write_text(text + own)
    argv = ["serve", "ironwood-256", "--model", "llama-3.1-8b", "--server", str(bad)]
    line = assert_one_error_line(*run(capsys, *argv))
    assert "chips.v99: no chip of that name" in line and "v6e" in line, line
    measured = tmp_path / "measured.yaml"
    data = yaml.safe_load(text)
    data["measured_chips"] = ["v6e", "v7"]
    measured.write_text(yaml.safe_dump(data, sort_keys=False))
    argv = ["serve", "ironwood-256", "--model", "llama-3.1-8b", "--server", str(measured)]
    line = assert_one_error_line(*run(capsys, *argv))
    assert "measured_chips.v7: no chip of that name" in line, line


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["validate", "--serving", "--jobs", "2"], "--jobs applies to --workloads"),
        (["validate", "--serving", "--approximate"], "--approximate applies to --workloads"),
        (["validate", "--serving", "--fidelity", "packet"], "--fidelity packet applies to"),
        (["calibrate", "--serving", "--jobs", "2"], "--jobs applies to --workloads"),
        (["calibrate", "--serving", "--fidelity", "analytic"], "--fidelity analytic applies"),
    ],
)
def test_flags_that_a_serving_validation_ignores_are_refused(capsys, argv, words):
    line = assert_one_error_line(*run(capsys, *argv))
    assert words in line, line


def test_jobs_with_the_dask_executor_is_refused(capsys):
    argv = ["run", "demo", "--executor", "dask", "--jobs", "2"]
    line = assert_one_error_line(*run(capsys, *argv))
    assert "--jobs sets the local executor's processes" in line, line


def test_remat_policy_against_recompute_false_is_refused(tmp_path, capsys):
    (tmp_path / "line2.yaml").write_text(
        "name: line2\nchip: v5e\ntopology: {kind: torus, dims: [2], wraparound: [false]}\n"
    )
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\nsystems: [line2.yaml]\nworkloads:\n"
        "  - {name: step, kind: training_step, layers: 2, d_model: 512, d_ff: 1024, heads: 8,"
        " head_dim: 64, seq: 256, vocab: 1000, batch_per_shard: 1, mesh: {data: 2},"
        " remat_policy: full, recompute: false}\n"
    )
    line = assert_one_error_line(*run(capsys, "check", str(path)))
    assert "recompute: false contradicts remat_policy: full" in line, line


def test_no_help_text_shows_a_pydantic_marker():
    """``tpusim serve --help`` printed "(default PydanticUndefined)" for ``--model``."""
    import argparse

    from tpusim.cli.app import build_parser

    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, command in sub.choices.items():
        text = command.format_help()
        assert "Pydantic" not in text and "Undefined" not in text, name


@pytest.mark.parametrize(
    ("keys", "advice"),
    [
        ("flow_tolerance: null\n", "flow_tolerance: deprecated; drop it (null is the default)"),
        (
            "fidelity: flow\nflow_tolerance: 0.05\n",
            "deprecated; write network: {fidelity: flow, tolerance: 0.05}",
        ),
        ("fidelity: packet\nflow_tolerance: 0.01\n", None),  # invalid: the error says why
    ],
)
def test_a_deprecation_warning_advises_only_valid_yaml(tmp_path, capsys, keys, advice):
    path = tmp_path / "s.yaml"
    path.write_text(
        f"name: d\nsystems: [v5e-pod]\n{keys}"
        "workloads: [{name: c, kind: collective, op: all-reduce, bytes: 1 KiB}]\n"
    )
    code, _, err = run(capsys, "check", str(path))
    warnings = [line for line in err.splitlines() if "deprecated" in line]
    if advice is None:
        assert code == 2 and warnings == [], err
        assert "tolerance belongs to flow" in err
    else:
        assert code == 0 and len(warnings) == 1 and advice in warnings[0], err
        written = warnings[0].split("write ")[-1] if "write" in advice else None
        if written:  # the advice itself validates
            import yaml

            from tpusim.network.tree import network_tree

            network_tree(yaml.safe_load(written.removeprefix("network: ")))


def test_an_slo_of_zero_is_refused_not_dropped(capsys):
    argv = ["serve", "v5e-pod", "--model", "llama-3.1-8b", "--slo-tpot", "10ms"]
    line = assert_one_error_line(*run(capsys, *argv, "--slo-ttft", "0s"))
    assert "--slo-ttft" in line and "greater than 0" in line, line


def test_a_collective_on_one_chip_is_refused_everywhere(tmp_path, capsys):
    """A group of one chip moves nothing: ``collective --chips 1``, a jobs entry on one
    chip and a measured case on a 1x1x1 slice reported 0 s (-100% error)."""
    line = assert_one_error_line(
        *run(capsys, "collective", "v5e-pod", "--op", "all-reduce", "--bytes", "1MiB",
             "--chips", "1")
    )  # fmt: skip
    assert "group of 1 chip moves nothing" in line, line
    jobs = tmp_path / "j.yaml"
    jobs.write_text(
        "name: j\nsystems: [v5e-pod]\nworkloads:\n  - name: shared\n    kind: jobs\n"
        "    jobs:\n      - {name: a, chips: [0], collective: {op: all-reduce, bytes: 1 MiB}}\n"
        "      - {name: b, chips: [2, 3], collective: {op: all-reduce, bytes: 1 MiB}}\n"
    )
    line = assert_one_error_line(*run(capsys, "check", str(jobs)))
    assert "jobs[0]" in line and "job 'a'" in line and "moves nothing" in line, line
    source = (REPO / "configs" / "measurements" / "amb-ironwood-guide.yaml").read_text()
    measured = tmp_path / "one.yaml"
    measured.write_text(
        source[: source.index("cases:")]
        + "cases:\n  - {id: one, chip: ironwood, slice: [1, 1, 1], op: all-gather,"
        " bytes: 2 MiB, measured_time: 30 us, split: fit, where: made up}\n"
    )
    line = assert_one_error_line(*run(capsys, "validate", "--measurements", str(measured)))
    assert "cases[0]" in line and "group of one chip moves nothing" in line, line
