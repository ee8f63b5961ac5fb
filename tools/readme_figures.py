"""Write the documentation's figure blocks from a run, so that no figure is typed in.

Each block sits between ``<!-- figures:NAME -->`` and ``<!-- /figures:NAME -->`` in
one of the pages (README.md or a ``docs/*.md`` page; the tool finds which) and is
rendered from one command's JSON:

- ``validation``: ``tpusim validate --json`` (about 10 s);
- ``claims``: ``tpusim claims --json`` (15-40 s);
- ``serving``: ``tpusim run serving --json`` (40-70 s on 2 cores);
- ``serving-validation``: ``tpusim validate --serving --json`` (about 5 s);
- ``workloads``: ``tpusim validate --workloads --json`` (about 30 s);
- ``workloads-cv-chip``, ``workloads-cv-family``: ``tpusim validate --workloads --cv
  chip|family --json`` (a few minutes each).

Usage (from the repository root)::

    python tools/readme_figures.py            # run them all, rewrite the pages
    python tools/readme_figures.py --check    # exit 1 naming each block that differs
    python tools/readme_figures.py --only validation --check

``--json-dir DIR`` reads ``DIR/NAME.json`` instead of running a command (a run saved
earlier). The test ``tests/test_readme_figures.py`` checks the validation block
against a fresh run in the default test run, and the other two under ``-m slow``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def pages() -> list[Path]:
    """The files that may hold figure blocks: README.md and every ``docs/*.md`` page."""
    return [README, *sorted(DOCS.glob("*.md"))]


#: The command whose JSON each block is rendered from.
COMMANDS: dict[str, list[str]] = {
    "validation": ["validate", "--json"],
    "claims": ["claims", "--json"],
    "serving": ["run", "serving", "--json", "--quiet", "--out", "{tmp}"],
    "serving-validation": ["validate", "--serving", "--json"],
    "workloads": ["validate", "--workloads", "--json"],
    "workloads-cv-chip": ["validate", "--workloads", "--cv", "chip", "--json"],
    "workloads-cv-family": ["validate", "--workloads", "--cv", "family", "--json"],
    "serving-cv-server": ["validate", "--serving", "--cv", "server", "--json"],
    "serving-cv-chip": ["validate", "--serving", "--cv", "chip", "--json"],
}


def run_json(name: str) -> Any:
    """Run block ``name``'s command (this checkout first on the path) and parse its
    stdout. A command that exits non-zero raises RuntimeError with its stderr."""
    with tempfile.TemporaryDirectory() as tmp:
        argv = [a.replace("{tmp}", tmp) for a in COMMANDS[name]]
        done = subprocess.run(
            [sys.executable, "-m", "tpusim", *argv],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"tpusim {' '.join(argv)}: exit {done.returncode}: {done.stderr}")
    return json.loads(done.stdout)


def validation_block(record: dict[str, Any]) -> str:
    """The validation table: points, within 10% and median |error| per split."""
    lines = ["| | points | within 10% | median abs. error |", "|---|---|---|---|"]
    for label, part in (("all", record), ("fit", record["fit"]), ("holdout", record["holdout"])):
        total, within = part["total"], part["within_10pct"]
        share = within / total if total else 0.0
        error = part["median_abs_error"]
        lines.append(f"| {label} | {total} | {within} ({share:.0%}) | {error:.1%} |")
    return "\n".join(lines)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _error(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1%}"


def workloads_block(record: dict[str, Any]) -> str:
    """``validate --workloads``: every case (with the memory model's peak HBM per chip
    and XLA's where a compile of the run is recorded), then the summary per split and
    the memory model against XLA."""
    lines = [
        "| case | chip | model | measured (s) | simulated (s) | error | split | status "
        "| HBM model (GB) | HBM XLA (GB) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in record["cases"]:
        times = (_seconds(c["measured_s"]), _seconds(c["simulated_s"]), _error(c["error"]))
        hbm = (_gigabytes(c["peak_hbm_bytes"]), _gigabytes(c["xla_peak_hbm_bytes"]))
        cells = (c["id"], c["chip"], c["model"], *times, c["split"], c["status"], *hbm)
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "| | cases | simulated | within 10% | within 15% | median abs. error |"]
    lines.append("|---|---|---|---|---|---|")
    for label, part in (("all", record), ("fit", record["fit"]), ("holdout", record["holdout"])):
        median = part["median_abs_error"]
        lines.append(
            f"| {label} | {part['total']} | {part['simulated']} | {part['within_10pct']} | "
            f"{part['within_15pct']} | {'-' if median is None else f'{median:.1%}'} |"
        )
    memory = record["memory_vs_xla"]
    if memory["cases"]:
        lines += [
            "",
            f"Peak HBM per chip, memory model against XLA: {memory['cases']} cases, median "
            f"|error| {memory['median_abs_error']:.1%}, largest {memory['max_abs_error']:.1%}.",
        ]
    return "\n".join(lines)


def _gigabytes(value: float | None) -> str:
    return "-" if value is None else f"{value / 1e9:.1f}"


def cv_block(record: dict[str, Any]) -> str:
    """``validate --workloads --cv``: each group's held-out median with the terms fitted
    without it, then the held-out summary."""
    lines = [
        f"| {record['cv']} left out | cases | held-out median abs. error | mxu | hbm | "
        "vector ops/element | fitted on |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in record["folds"]:
        t = f["terms"]
        lines.append(
            f"| {f['group']} | {len(f['cases'])} | {_error(f['median_abs_error']).lstrip('+')} "
            f"| {t['mxu']:.3f} | {t['hbm']:.3f} | {t['vector_ops_per_element']:.1f} "
            f"| {len(f['fit_on'])} cases |"
        )
    held = record["held_out"]
    lines.append(
        f"| **all held out** | {held['simulated']} | {held['median_abs_error']:.1%} "
        f"| | | | {held['within_15pct']} of {held['simulated']} within 15% |"
    )
    return "\n".join(lines)


def claims_block(record: dict[str, Any]) -> str:
    """What ``tpusim claims`` prints today: each claim, tpusim's figure, the verdict,
    the interval that decided it and, for a claim with several readings, the reading
    judged and the others."""
    lines = [
        "| Claim | tpusim | Verdict | Interval | Reading |",
        "|---|---|---|---|---|",
    ]
    for claim in record["claims"]:
        keys = ("claim", "tpusim", "verdict", "interval", "reading")
        cells = (str(claim.get(key) or "") for key in keys)
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


#: The serving table's systems (column heading, system name) and rows (heading,
#: column of the summary row, format).
SERVING_SYSTEMS = (("8i", "tpu8i-pod"), ("Ironwood", "ironwood-256"), ("8t", "tpu8t-superpod"))
SERVING_MODELS = (("Llama 3.1 70B", "llama-70b-fp8"), ("DeepSeek-V3", "deepseek-v3-fp8"))
SERVING_ROWS: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("capacity (req/s per chip)", "capacity_rate_per_s_per_chip", lambda v: f"{v:.3g}"),
    (
        "output tokens/s per chip at capacity",
        "tokens_per_s_per_chip",
        lambda v: f"{v:,.0f}",
    ),
    ("energy per M output tokens (MJ)", "energy_per_million_tokens_J", lambda v: f"{v / 1e6:.2f}"),
    (
        "cost per M output tokens (USD, midpoint prices)",
        "cost_per_million_tokens_usd",
        lambda v: f"{v:.2f}",
    ),
)


def serving_block(record: dict[str, Any]) -> str:
    """The serving-across-generations table from ``tpusim run serving --json``."""
    rows = {(r["system"], r["workload"]): r for r in record["results"]}
    heads = " | ".join(head for head, _ in SERVING_SYSTEMS)
    lines = [f"| | {heads} |", "|---" * (len(SERVING_SYSTEMS) + 1) + "|"]
    for model, workload in SERVING_MODELS:
        for label, column, fmt in SERVING_ROWS:
            cells = []
            for _, system in SERVING_SYSTEMS:
                value = rows.get((system, workload), {}).get(column)
                cells.append("n/a" if value is None else fmt(value))
            lines.append(f"| {model}: {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _serving_value(metric: str, value: float | None) -> str:
    """A serving figure as the README writes it: times in ms, rates with commas."""
    if value is None:
        return "-"
    return f"{value * 1e3:,.2f} ms" if metric.endswith("median_s") else f"{value:,.1f}"


def serving_validation_block(record: dict[str, Any]) -> str:
    """``tpusim validate --serving``: each (figure, metric) with its slice and server
    profile, then the median |error| overall, per split and per metric."""
    lines = [
        "| Figure | Split | Slice | Server | Metric | Measured | Simulated | Error |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in record["cases"]:
        error = "-" if c["error"] is None else f"{c['error']:+.1%}"
        measured = _serving_value(c["metric"], c["measured"])
        simulated = _serving_value(c["metric"], c["simulated"])
        cells = (c["id"], c["split"], c["slice"], c["server"], c["metric"], measured, simulated)
        cells += (error,)
        lines.append("| " + " | ".join(cells) + " |")
    parts = [("all", record), ("fit", record["fit"]), ("holdout", record["holdout"])]
    parts += [(m, p) for m, p in record["metrics"].items() if p["total"]]
    lines += ["", "| | points | within 10% | median abs. error |", "|---|---|---|---|"]
    for label, part in parts:
        if part["total"]:
            error = part["median_abs_error"]
            lines.append(f"| {label} | {part['total']} | {part['within_10pct']} | {error:.1%} |")
    return "\n".join(lines)


def serving_cv_block(record: dict[str, Any]) -> str:
    """``validate --serving --cv``: each group's held-out median with the terms fitted
    without it, then the held-out summary overall and per metric."""
    lines = [
        f"| {record['cv']} left out | points | held-out median abs. error | terms fitted "
        "without it (host, device per iteration, the derived MoE time a token, never "
        "fitted; HBM; figures) |",
        "|---|---|---|---|",
    ]
    for fold in record["folds"]:
        terms = "; ".join(
            f"{f['server']}: {f['host_s'] * 1e3:.3g} ms, {f['step_s'] * 1e3:.3g} ms, "
            f"{f.get('moe_token_s', 0.0) * 1e6:.3g} us; "
            f"{f['hbm_efficiency']:.2f}; {len(f['fit_on'])}"
            for f in fold["fitted"]
        )
        points = sum(c["error"] is not None for c in fold["cases"])
        error = _error(fold["median_abs_error"]).lstrip("+")
        lines.append(f"| {fold['group']} | {points} | {error} | {terms} |")
    held = record["held_out"]
    parts = [("**all held out**", held)]
    parts += [(m, p) for m, p in held["metrics"].items() if p["total"]]
    lines += ["", "| held out | points | within 10% | median abs. error |", "|---|---|---|---|"]
    for label, part in parts:
        error = part["median_abs_error"]
        lines.append(f"| {label} | {part['total']} | {part['within_10pct']} | {error:.1%} |")
    return "\n".join(lines)


RENDER: dict[str, Callable[[Any], str]] = {
    "validation": validation_block,
    "claims": claims_block,
    "serving": serving_block,
    "serving-validation": serving_validation_block,
    "workloads": workloads_block,
    "workloads-cv-chip": cv_block,
    "workloads-cv-family": cv_block,
    "serving-cv-server": serving_cv_block,
    "serving-cv-chip": serving_cv_block,
}


def block_pattern(name: str) -> re.Pattern[str]:
    """The block ``name`` in the README: its markers and the text between them."""
    return re.compile(rf"(<!-- figures:{name} -->\n)(.*?)(<!-- /figures:{name} -->)", re.S)


def current_block(text: str, name: str) -> str:
    """Block ``name``'s text in ``text``; raises KeyError when its markers are absent."""
    found = block_pattern(name).search(text)
    if found is None:
        raise KeyError(f"no <!-- figures:{name} --> block")
    return found.group(2).rstrip("\n")


def page_of(texts: dict[Path, str], name: str) -> Path:
    """The page (of ``texts``, path to text) holding block ``name``; KeyError if none."""
    for page, text in texts.items():
        if block_pattern(name).search(text):
            return page
    raise KeyError(f"no page of README.md, docs/*.md has a <!-- figures:{name} --> block")


def read_block(name: str) -> str:
    """Block ``name`` as the pages on disk hold it."""
    texts = {page: page.read_text(encoding="utf-8") for page in pages()}
    return current_block(texts[page_of(texts, name)], name)


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with block ``name`` replaced by ``body``."""
    current_block(text, name)  # raises when absent
    return block_pattern(name).sub(lambda m: m.group(1) + body + "\n" + m.group(3), text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    parser.add_argument("--only", nargs="+", choices=sorted(RENDER), help="these blocks")
    parser.add_argument("--json-dir", type=Path, help="read NAME.json here, run nothing")
    args = parser.parse_args(argv)
    texts = {page: page.read_text(encoding="utf-8") for page in pages()}
    new, stale = dict(texts), []
    for name in args.only or sorted(RENDER):
        if args.json_dir is not None:
            record = json.loads((args.json_dir / f"{name}.json").read_text())
        else:
            record = run_json(name)
        body = RENDER[name](record)
        page = page_of(new, name)
        if current_block(new[page], name) != body:
            stale.append(f"{page.relative_to(ROOT)}: {name}")
        new[page] = replace_block(new[page], name, body)
    if args.check:
        for where in stale:
            print(f"{where} block differs from a fresh run", file=sys.stderr)
        return 1 if stale else 0
    for page, text in new.items():
        if text != texts[page]:
            page.write_text(text, encoding="utf-8")
    print(f"{len(stale)} block(s) rewritten: {', '.join(stale) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
