"""Capture the golden outputs that guard refactors (tests/test_golden.py).

Run only when a number is *meant* to change, and say so in the commit message::

    python tools/capture_golden.py

Writes tests/golden/cli.json (the ``--json`` of ``tpusim topo``, ``tpusim collective``
and ``tpusim hlo`` on the cases of ``CASES``) and tests/golden/scenario/*.csv (the
reduced generations scenario's summary, ops and links tables).
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sys
import tempfile
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

from tpusim.cli import main  # noqa: E402
from tpusim.results.run import ScenarioRun  # noqa: E402
from tpusim.results.writers import Outputs  # noqa: E402
from tpusim.study.scenario import Scenario  # noqa: E402

HLO = "tests/fixtures/hlo/transformer_8.hlo.txt"

#: argv of each captured command (all with --json)
CASES: list[list[str]] = [
    ["topo", "v5e-pod"],
    ["topo", "ironwood-pod"],
    ["topo", "tpu8i-pod"],
    ["topo", "tpu8t-virgo"],
    ["topo", "v4-pod"],
    ["topo", "torus-8x8x16"],
    ["collective", "ironwood-256", "--op", "all-reduce", "--bytes", "1KiB"],
    ["collective", "ironwood-256", "--op", "all-reduce", "--bytes", "64MiB"],
    ["collective", "ironwood-256", "--op", "all-gather", "--bytes", "16MiB", "--axes", "y,z"],
    [
        "collective",
        "ironwood-256",
        "--op",
        "reduce-scatter",
        "--bytes",
        "32MiB",
        "--algorithm",
        "bidir-ring",
    ],
    ["collective", "v5e-pod", "--op", "all-to-all", "--bytes", "1MiB", "--axes", "x"],
    ["collective", "v5e-pod", "--op", "all-reduce", "--bytes", "4MiB", "--fidelity", "analytic"],
    [
        "collective",
        "v5e-pod",
        "--op",
        "all-reduce",
        "--bytes",
        "1MiB",
        "--axes",
        "x",
        "--fidelity",
        "packet",
    ],
    [
        "collective",
        "v5e-pod",
        "--op",
        "collective-permute",
        "--bytes",
        "8MiB",
        "--pairs",
        "0:1,1:2,2:0,5:200",
        "--fidelity",
        "packet",
        "--packet-bytes",
        "256KiB",
    ],
    ["collective", "tpu8i-1024", "--op", "all-reduce", "--bytes", "1KiB"],
    [
        "collective",
        "tpu8i-1024",
        "--op",
        "all-to-all",
        "--bytes",
        "1MiB",
        "--algorithm",
        "direct",
        "--axes",
        "board,chip",
    ],
    ["collective", "tpu8i-pod", "--op", "all-gather", "--bytes", "64MiB", "--axes", "board,chip"],
    [
        "collective",
        "tpu8i-1024",
        "--op",
        "broadcast",
        "--bytes",
        "64KiB",
        "--no-offload",
        "--axes",
        "group",
    ],
    [
        "collective",
        "v5p-pod",
        "--op",
        "all-reduce",
        "--bytes",
        "256MiB",
        "--axes",
        "x",
        "--engine",
        "tensorcore",
    ],
    ["collective", "tpu8t-virgo", "--op", "all-reduce", "--bytes", "16MiB", "--chips", "64"],
    [
        "collective",
        "ironwood-pod",
        "--op",
        "all-reduce",
        "--bytes",
        "8MiB",
        "--sweep-bytes",
        "1KiB:4KiB",
    ],
    [
        "collective",
        "torus-8x8x16",
        "--op",
        "all-gather",
        "--bytes",
        "1MiB",
        "--algorithm",
        "halving-doubling",
        "--axes",
        "z",
    ],
    ["hlo", HLO, "--system", "ironwood-256"],
    ["hlo", HLO, "--system", "tpu8i-1024", "--fidelity", "analytic"],
    ["serve", "ironwood-256", "--model", "llama-3.1-8b", "--rate", "4", "--requests", "300"],
    [
        "serve",
        "tpu8i-1024",
        "--model",
        "llama-3.1-8b",
        "--find-capacity",
        "--slo-ttft",
        "2s",
        "--slo-tpot",
        "50ms",
        "--requests",
        "400",
    ],
    [
        "serve",
        "ironwood-256",
        "--model",
        "llama-3.1-8b",
        "--disaggregate",
        "1:2",
        "--rate",
        "8",
        "--requests",
        "200",
    ],
    [
        "faults",
        "ironwood-256",
        "--op",
        "all-reduce",
        "--bytes",
        "16MiB",
        "--fail-links",
        "0:2",
        "--trials",
        "3",
    ],
    [
        "plan",
        "llama-3.1-8b",
        "ironwood-256",
        "--global-batch",
        "256",
        "--seq",
        "2048",
        "--layers",
        "4",
    ],
    ["validate"],
    ["validate", "--serving"],
]

#: the golden scenarios: YAML under tests/golden/ -> folder of their tables
SCENARIOS = {"reduced-generations.yaml": "scenario", "reduced-models.yaml": "scenario-models"}


def run_json(argv: list[str]) -> dict:
    """The JSON object ``tpusim ARGV --json`` prints (``--bytes`` dropped for sweeps)."""
    if "--sweep-bytes" in argv:
        i = argv.index("--bytes")
        argv = argv[:i] + argv[i + 2 :]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([*argv, "--json"])
    if code != 0:
        raise RuntimeError(f"tpusim {' '.join(argv)} exited {code}")
    return json.loads(out.getvalue())


def run_scenario_tables(folder: Path, scenario: str = "reduced-generations.yaml") -> None:
    """Run a golden scenario (a YAML under tests/golden/) in-process into ``folder``,
    without its figures: only the tables are compared, and drawing the PNG and SVG
    files was half the run's time (issue 34; tests/test_generations.py checks them)."""
    original = Scenario.outputs

    def without_plots(self: Scenario, run: ScenarioRun) -> Outputs:
        outputs = original(self, run)
        outputs.with_plots = False
        return outputs

    with (
        mock.patch.object(Scenario, "outputs", without_plots),
        contextlib.redirect_stdout(io.StringIO()),
    ):
        code = main(
            [
                "run",
                str(GOLDEN / scenario),
                "--out",
                str(folder),
                "--jobs",
                "1",
                "--quiet",
            ]
        )
    if code != 0:
        raise RuntimeError(f"the golden scenario {scenario} exited {code}")


def links_digest(path: Path) -> pd.DataFrame:
    """links.csv (megabytes) reduced to a few numbers per system and workload: rows,
    total bytes, a position-weighted byte sum and the busiest link's utilisation."""
    links = pd.read_csv(path)
    links["weighted"] = links["bytes"] * (links["src"] * 7919 + links["dst"])
    return (
        links.groupby(["system", "workload"], sort=True)
        .agg(
            rows=("bytes", "size"),
            bytes=("bytes", "sum"),
            weighted=("weighted", "sum"),
            max_utilization=("utilization", "max"),
        )
        .reset_index()
    )


def main_capture() -> None:
    cases = [{"argv": argv, "json": run_json(argv)} for argv in CASES]
    (GOLDEN / "cli.json").write_text(json.dumps(cases, indent=1) + "\n")
    for scenario, folder in SCENARIOS.items():
        with tempfile.TemporaryDirectory() as tmp:
            run_scenario_tables(Path(tmp), scenario)
            target = GOLDEN / folder
            target.mkdir(exist_ok=True)
            for name in ("summary.csv", "ops.csv"):
                shutil.copy(Path(tmp) / name, target / name)
            links_digest(Path(tmp) / "links.csv").to_csv(target / "links-digest.csv", index=False)
    print(f"wrote {GOLDEN / 'cli.json'} ({len(cases)} cases) and {', '.join(SCENARIOS.values())}")


if __name__ == "__main__":
    main_capture()
