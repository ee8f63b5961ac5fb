"""The serving figures' schema (issue 41): source, commands, dtypes, expert
parallelism, speculative decoding, disaggregation, the p99 metrics, the split rule
the loader checks and the warning naming what a run does not simulate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.helpers import run
from tpusim.errors import ConfigError
from tpusim.validation.serving import unsimulated, warnings
from tpusim.validation.serving_figures import load_figures

VALID = Path(__file__).parent / "corpus" / "round3" / "serving" / "valid.yaml"


def _write(tmp_path: Path, **changes: object) -> Path:
    """The valid corpus file with ``changes`` set on its one figure."""
    data = yaml.safe_load(VALID.read_text())
    data["figures"][0].update(changes)
    path = tmp_path / "figures.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _line_of(path: Path, key: str) -> int:
    """The 1-based line of ``key:`` in ``path`` (the oracle for the error's line)."""
    lines = path.read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if text.strip().startswith(f"{key}:"))


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("weight_dtype", "fp16", "weight_dtype"),
        ("kv_dtype", "fp6", "kv_dtype"),
        ("ep", -1, "ep"),
        ("ep", 2, "ep 2 needs more chips"),
        ("random_range_ratio", 1.0, "random_range_ratio"),
        ("commit", "abc", "commit"),
        ("speculative", {"method": "mtp", "draft_tokens": 0}, "speculative.draft_tokens"),
    ],
)
def test_bad_new_fields_name_file_line_and_path(tmp_path, key, value, says):
    path = _write(tmp_path, **{key: value})
    with pytest.raises(ConfigError, match=says) as info:
        load_figures([path])
    assert info.value.file == str(path)
    assert info.value.path.startswith("figures[0]")
    assert info.value.line is not None


def test_a_source_given_in_part_is_refused(tmp_path):
    path = _write(tmp_path, repo="AI-Hypercomputer/tpu-recipes", line=3)
    with pytest.raises(ConfigError, match="repo, line given without the rest"):
        load_figures([path])


def test_the_loader_refuses_a_split_the_rule_does_not_give(tmp_path):
    """One figure per (chip, dtype): the rule makes it fit; holdout is refused at its
    split line."""
    path = _write(tmp_path, split="holdout")
    with pytest.raises(ConfigError, match="breaks the file's split_rule") as info:
        load_figures([path])
    assert info.value.path == "figures[0].split"
    assert info.value.line == _line_of(path, "split")


def test_the_second_of_two_figures_by_id_is_the_holdout(tmp_path):
    """Two figures of one (chip, dtype): the first by id is fit, whatever the file
    order ("fig..." before "late"); swapping their splits is refused."""
    data = yaml.safe_load(VALID.read_text())
    late = dict(data["figures"][0], id="late", published="2025-05-01", split="holdout")
    data["figures"].insert(0, late)
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert [f.split for f in load_figures([path])] == ["holdout", "fit"]
    data["figures"][0]["split"], data["figures"][1]["split"] = "fit", "holdout"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(ConfigError, match="gives holdout"):
        load_figures([path])


def test_a_file_without_split_rule_is_refused(tmp_path):
    data = yaml.safe_load(VALID.read_text())
    del data["split_rule"]
    path = tmp_path / "norule.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(ConfigError, match="split_rule"):
        load_figures([path])


def test_every_shipped_repository_figure_has_its_exact_source():
    """A figure read from a repository file names repo, path, commit and line; the only
    others are pull-request descriptions (no file to point into)."""
    for figure in load_figures():
        if "/pull/" in figure.url:
            continue
        assert figure.repo and figure.path and figure.commit and figure.line, figure.id
        assert figure.commit in figure.url or "/main/" in figure.url, figure.id


def test_unsimulated_fields_are_named_never_dropped(tmp_path):
    """Experts over other chips than the tp ones, speculative decoding without an
    acceptance and disaggregation each appear in the figure's warning; the plain figure
    has none; the KV dtype, the range ratio and vLLM's expert parallelism over the tp
    chips (ep = tp: the run's expert_parallel), which the run simulates, do not."""
    plain = load_figures([VALID])[0]
    assert unsimulated(plain) == [] and warnings([plain]) == []
    path = _write(
        tmp_path,
        weight_dtype="fp8",
        kv_dtype="bf16",
        random_range_ratio=0.8,
        speculative={"method": "mtp", "draft_tokens": 2},
        disaggregate="1:1",
        slice={"name": "v6e-2", "chips": 2, "dims": [2]},
        ep=2,
    )
    figure = load_figures([path])[0]
    (line,) = warnings([figure])
    for field in ("ep 2", "speculative mtp", "disaggregate 1:1"):
        assert field in line
    assert "kv_dtype" not in line and "random_range_ratio" not in line
    assert line.startswith(f"warning: {figure.id}: not simulated:")
    same = load_figures([_write(tmp_path, ep=1)])[0]
    assert same.ep == same.tp == 1 and warnings([same]) == []


def test_speculative_with_acceptance_is_simulated(tmp_path):
    path = _write(tmp_path, speculative={"method": "mtp", "draft_tokens": 2, "acceptance": 0.7})
    assert unsimulated(load_figures([path])[0]) == []


@pytest.mark.slow
def test_validate_serving_json_covers_every_shipped_figure_on_three_chips(capsys):
    """``validate --serving --json`` over the shipped files (about 18 s): a case row for
    every figure, at least 30 figures (issue 41) on at least the three chips v5e, v6e and
    Ironwood, and one warning line per figure with an unsimulated field."""
    figures = load_figures()
    assert len(figures) >= 30
    code, out, err = run(capsys, "validate", "--serving", "--json")
    assert code == 0, err
    record = json.loads(out)
    assert {c["id"] for c in record["cases"]} == {f.id for f in figures}
    assert {"v5e", "v6e", "ironwood"} <= {c["chip"] for c in record["cases"]}
    assert len(record["warnings"]) == sum(bool(unsimulated(f)) for f in figures)


def test_the_kv_dtype_and_the_range_ratio_reach_the_run(tmp_path):
    """A figure's kv_dtype is its service's, and vLLM's --random-range-ratio 0.8 on
    1,000 tokens draws whole lengths on [199, 1800] (vLLM's RandomDataset: floor(L(1-r))
    to ceil(L(1+r)) in floats, where 1000 * (1 - 0.8) is 199.99999999999997)."""
    import numpy as np

    from tpusim.validation.serving import Simulator, lengths, shipped_overheads

    path = _write(tmp_path, weight_dtype="fp8", kv_dtype="fp8", random_range_ratio=0.8)
    figure = load_figures([path])[0]
    service = Simulator().service(figure, shipped_overheads(figure))
    assert service.deployment.kv_dtype == "fp8" and service.deployment.dtype == "fp8"
    drawn = lengths(1000, 0.8).draw(np.random.default_rng(0), 20000)
    assert drawn.min() == 199 and drawn.max() == 1800
    assert abs(drawn.mean() - 1000) < 10
    assert lengths(999, None).kind == "fixed"


def test_the_inferencex_client_draws_its_own_range(tmp_path):
    """The InferenceX client (utils/bench_serving/benchmark_serving.py at 89ce6098,
    ``np.random.randint(int(L * r), L + 1)``) draws --random-range-ratio 0.8 on 1,024
    tokens as whole lengths on [819, 1024], mean 921.5, not vLLM's [204, 1844]; a figure
    naming ``random_client: inferencex`` runs that stream, and an unknown client is
    refused naming the key."""
    import numpy as np

    from tpusim.errors import ConfigError
    from tpusim.validation.serving import lengths

    drawn = lengths(1024, 0.8, "inferencex").draw(np.random.default_rng(0), 20000)
    assert drawn.min() == 819 and drawn.max() == 1024
    assert abs(drawn.mean() - 921.5) < 2
    vllm = lengths(1024, 0.8).draw(np.random.default_rng(0), 20000)
    assert vllm.min() == 204 and vllm.max() == 1844
    figure = load_figures([_write(tmp_path, random_range_ratio=0.8, random_client="inferencex")])[0]
    assert figure.random_client == "inferencex"
    with pytest.raises(ConfigError, match="random_client"):
        load_figures([_write(tmp_path, random_range_ratio=0.8, random_client="sglang")])


def test_jetstream_2024_tpot_is_the_whole_latency_over_the_output_tokens(tmp_path):
    """``tpot_definition: jetstream-2024`` (JetStream's benchmark_serving.py at 530d364,
    line 382: ``latency / output_len``): for one request alone, fixed lengths, its TPOT
    is ``(TTFT + (out - 1) x vLLM's TPOT) / out``, the closed form of the same run's vLLM
    figures; a request not finished has none; an unknown definition is refused naming
    the key."""
    from tpusim.serving.metrics import latencies
    from tpusim.serving.scheduler import Request
    from tpusim.validation.serving import Simulator, shipped_overheads

    done = Request(0, arrival_at=2.0, prompt_tokens=10, output_tokens=4)
    done.first_token_at, done.finished_at = 3.0, 6.0
    waiting = Request(1, arrival_at=0.0, prompt_tokens=10, output_tokens=4)
    assert list(latencies([done, waiting], "jetstream-2024")["tpot"]) == [1.0]  # (6 - 2) / 4

    out = 120
    one = _write(tmp_path, simulated_requests=1, concurrency=1)
    vllm = load_figures([one])[0]
    jet = vllm.model_copy(update={"tpot_definition": "jetstream-2024"})
    sim = Simulator()
    a = sim.simulate(vllm, shipped_overheads(vllm))
    b = sim.simulate(jet, shipped_overheads(jet))
    closed = (a["ttft_median_s"] + (out - 1) * a["tpot_median_s"]) / out
    assert b["tpot_median_s"] == pytest.approx(closed, rel=1e-12)
    assert b["ttft_median_s"] == a["ttft_median_s"]
    with pytest.raises(ConfigError, match="tpot_definition"):
        load_figures([_write(tmp_path, tpot_definition="jetstream-2025")])
