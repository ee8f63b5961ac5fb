"""``tpusim models``: the shipped model presets and their parameter counts."""

from __future__ import annotations

import argparse
from typing import Any

from tpusim.cli.flags import Subparsers
from tpusim.cli.model_flags import JsonOutput, add_model_flags
from tpusim.config.loader import load_model, shipped
from tpusim.report import text_table
from tpusim.results.files import json_text

COLUMNS = ("name", "parameters", "active", "published", "layers", "d_model", "attention", "moe")


def add_parsers(sub: Subparsers) -> None:
    """The subcommand, on the CLI's subparsers."""
    p = sub.add_parser("models")
    add_model_flags(p, JsonOutput)
    p.set_defaults(func=cmd_models)


def cmd_models(args: argparse.Namespace) -> None:
    rows = [load_model(name).row() for name in shipped("models")]
    if args.as_json:
        print(json_text({"models": rows}))
        return
    print(text_table([_text_row(r) for r in rows], COLUMNS))


def _billions(count: float | None) -> str:
    return "-" if count is None else f"{count / 1e9:.2f}B"


def _text_row(row: dict[str, Any]) -> dict[str, str]:
    attention = f"{row['attention']} {row['heads']}h"
    if row["attention"] == "gqa":
        attention += f"/{row['kv_heads']}kv"
    moe = "-"
    if row["experts"]:
        moe = f"{row['experts']} top-{row['top_k']}"
        if row["shared_experts"]:
            moe += f" +{row['shared_experts']} shared"
    published = _billions(row["published_parameters"])
    if row["published_active_parameters"]:
        published += f" ({_billions(row['published_active_parameters'])} active)"
    return {
        "name": row["name"],
        "parameters": _billions(row["parameters"]),
        "active": _billions(row["active_parameters"]),
        "published": published,
        "layers": str(row["layers"]),
        "d_model": str(row["d_model"]),
        "attention": attention,
        "moe": moe,
    }
