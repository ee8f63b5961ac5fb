"""One typed model of a serving run's options (issue 25): ``tpusim serve`` fills it
from its flags and a ``kind: serving`` workload is it, so the same options give the
same run from either entry point, and a workload's bad value names its YAML key and
line, never a flag."""

from __future__ import annotations

import dataclasses
import json
import re
import shlex

import pytest

from tests.helpers import assert_one_error_line, run
from tpusim.cli.app import build_parser
from tpusim.cli.serve import flag_of
from tpusim.serving.options import ServeOptions, ServeSpec
from tpusim.workloads.serving import ServingRecord, ServingWorkload
from tpusim.workloads.spec import VARIANT_KEYS

#: Options as the workload's YAML (a flow mapping) and as ``tpusim serve`` flags.
SAME_OPTIONS = [
    (
        "tp: 2, rate: 4, requests: 40, prompt_tokens: 128, "
        "output_tokens: {uniform: [4, 12]}, seed: 3",
        "--tp 2 --rate 4 --requests 40 --prompt-tokens 128 "
        "--output-tokens '{uniform: [4, 12]}' --seed 3",
    ),
    (
        "tp: 1, replicas: 2, arrival: gamma, burstiness: 2, requests: 60, "
        "prompt_tokens: {lognormal: {median: 200, sigma: 0.5}}, output_tokens: 16, "
        "prefix_tokens: 64, prefix_hit_rate: 0.5, draft_tokens: 2, acceptance: 0.6, "
        "max_sequences: 16, block_size: 32, async_scheduling: false, seed: 7",
        "--tp 1 --replicas 2 --arrival gamma --burstiness 2 --requests 60 "
        "--prompt-tokens '{lognormal: {median: 200, sigma: 0.5}}' --output-tokens 16 "
        "--prefix-tokens 64 --prefix-hit-rate 0.5 --draft-tokens 2 --acceptance-rate 0.6 "
        "--max-seqs 16 --block-size 32 --no-async-scheduling --seed 7",
    ),
    (
        "tp: 2, requests: 150, prompt_tokens: 256, output_tokens: 32, find_capacity: true, "
        "slo_ttft: 500 ms, slo_tpot: 20 ms",
        "--tp 2 --requests 150 --prompt-tokens 256 --output-tokens 32 --find-capacity "
        "--slo-ttft 500ms --slo-tpot 20ms",
    ),
]

SCENARIO = """name: s
systems: [tpu8i-pod]
assumptions:
  power_per_chip: {{tpu8i: 1000 W}}
  price_per_chip_hour_usd: {{tpu8i: 3.6}}
workloads:
  - {{name: sv, kind: serving, model: llama-3.1-8b, {fields}}}
"""


@pytest.mark.parametrize(("fields", "flags"), SAME_OPTIONS)
def test_the_cli_and_a_scenario_given_the_same_options_serve_the_same(
    tmp_path, capsys, fields, flags
):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(fields=fields))
    code, out, _ = run(capsys, "run", str(path), "--out", str(tmp_path / "o"), "--json", "--quiet")
    assert code == 0
    (scenario_row,) = json.loads(out)["results"]
    economics = ["--power-per-chip", "1000", "--price-per-chip-hour", "3.6"]
    argv = ["serve", "tpu8i-pod", "--model", "llama-3.1-8b", *shlex.split(flags), *economics]
    argv.append("--json")
    code, out, _ = run(capsys, *argv)
    assert code == 0
    cli_row = json.loads(out)
    columns = {f.name for f in dataclasses.fields(ServingRecord)}
    compared = {c for c in columns - {"system", "workload", "kind", "curve"} if c in cli_row}
    assert {"ttft_p99_s", "tpot_p99_s", "output_tokens_per_s", "completed"} <= compared
    assert {c: scenario_row[c] for c in compared} == {c: cli_row[c] for c in compared}


def _key_line(text: str, key: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.strip().startswith(key))


@pytest.mark.parametrize(
    ("fields", "key", "says"),
    [
        ({"seed": -1}, "seed", "must be >= 0"),
        ({"requests": 10**9}, "requests", "must be 1 to 1,000,000"),
        ({"prefix_hit_rate": 0.5}, "prefix_hit_rate", "needs prefix_tokens"),
        ({"rate": 1e-20}, "rate", "past the clock's resolution"),
        ({"disaggregate": "1:x"}, "disaggregate", "expected P:D"),
        ({"draft_tokens": 1000}, "draft_tokens", "must be 0 to 64"),
        ({"expert_imbalance": 2}, "expert_imbalance", "expert-parallel degree 1"),
        ({"prompt_tokens": 200000}, "prompt_tokens", "exceed the model's context"),
        ({"tp": 2, "chips": 3}, "chips", "is not tp x ep"),
        ({"concurrency": 1, "replicas": 2, "tp": 1}, "concurrency", "below the 2 replicas"),
        ({"find_capacity": True, "slo_ttft": "1 s", "slo_tpot": "1 s"}, "requests", "at least"),
    ],
)
def test_a_bad_serving_workload_value_names_its_yaml_key_and_line(
    tmp_path, capsys, fields, key, says
):
    """Checked by the model (seed, requests, ...) or only once the deployment is loaded
    (the imbalance, the context, the chips, the closed loop's clients): the error is at
    the key's own line, and says no ``--flag``."""
    body = "".join(f"    {k}: {json.dumps(v)}\n" for k, v in fields.items())
    text = (
        "name: s\nsystems: [tpu8i-pod]\nworkloads:\n  - name: w\n    kind: serving\n"
        f"    model: llama-3.1-8b\n    requests: 20\n{body}"
    )
    if "requests" in fields:
        text = text.replace("    requests: 20\n", "", 1)
    path = tmp_path / "s.yaml"
    path.write_text(text)
    line = assert_one_error_line(*run(capsys, "check", str(path)))
    assert f"{path}:{_key_line(text, key + ':')} workloads[0].{key}" in line
    assert says in line
    assert not re.search(r"--[a-z]", line)


def test_every_option_a_user_chooses_is_a_serve_flag():
    """The serve parser's flags are generated from the options' fields: each sets its
    field (its ``dest``), under the flag name the errors use, with the field's
    description as its help; the network is set by the network flags."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    serve = sub.choices["serve"]  # type: ignore[attr-defined]
    actions = {a.dest: a for a in serve._actions if a.option_strings}
    chosen = set(ServeOptions.model_fields) - {"network"}
    assert chosen <= set(actions)
    for field in chosen:
        assert flag_of(field) in actions[field].option_strings
        description = ServeOptions.model_fields[field].description
        assert description and actions[field].help.startswith(description), field
    # the names kept from before the flags were generated (the CLI contract)
    kept = {"max_sequences": "--max-seqs", "acceptance": "--acceptance-rate"}
    kept |= {"overheads": "--no-overheads", "async_scheduling": "--no-async-scheduling"}
    kept |= {"power_per_chip_W": "--power-per-chip"}
    kept |= {"price_per_chip_hour_usd": "--price-per-chip-hour"}
    assert all(flag_of(field) == flag for field, flag in kept.items())
    assert actions["fidelity"].default == "flow"


def test_the_workload_is_the_options_model():
    """A serving workload's keys are the options' own fields, defined once."""
    assert issubclass(ServingWorkload, ServeSpec)
    own = set(ServingWorkload.model_fields) - set(ServeSpec.model_fields)
    assert own == {"kind", "name", *VARIANT_KEYS}
