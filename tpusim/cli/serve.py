"""``tpusim serve SYSTEM --model NAME``: an inference service at a request rate, or its
capacity at an SLO (``--find-capacity``).

A thin parser: the flags are generated from :class:`~tpusim.serving.options.ServeOptions`
(:mod:`tpusim.cli.model_flags`: each flag's ``dest`` is the field it sets, its help the
field's description, its default the model's) and from the network options models, and
the model's errors, which name fields (the one to blame and those they mention), come
back naming the flags.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, ValidationError
from pydantic_core import ErrorDetails

from tpusim.cli.flags import Subparsers
from tpusim.cli.model_flags import add_model_flags, model_values
from tpusim.cli.model_flags import flag_of as model_flag
from tpusim.cli.network_flags import add_network_flags, network_of
from tpusim.config.limits import MAX_CURVE_RATES, stream_span_problem
from tpusim.errors import InputError
from tpusim.later import Later
from tpusim.results.files import json_text
from tpusim.results.intervals import BASIS, range_text
from tpusim.serving.option_error import OptionError
from tpusim.serving.options import DEFAULT_REQUESTS, ServeOptions

if TYPE_CHECKING:
    from tpusim.config.loader import System

TABLE_FIELDS = (
    ("replicas x chips", None),
    ("requests", None),
    ("completed", None),
    ("rejected", None),
    ("rate_per_s", "req/s"),
    ("concurrency", None),
    ("ttft_p50_s", "s"),
    ("ttft_p99_s", "s"),
    ("tpot_p50_s", "s"),
    ("tpot_p99_s", "s"),
    ("e2e_p50_s", "s"),
    ("e2e_p99_s", "s"),
    ("output_tokens_per_s", "tok/s"),
    ("tokens_per_s_per_chip", "tok/s"),
    ("kv_cache_capacity_tokens", "tokens"),
    ("preemptions", None),
    ("goodput_rate_per_s", "req/s"),
    ("kv_transfer_p50_s", "s"),
    ("capacity_rate_per_s", "req/s"),
    ("request_throughput_per_s", "req/s"),
    ("ttft_mean_s", "s"),
    ("tpot_mean_s", "s"),
    ("capacity_rate_per_s_per_chip", "req/s"),
)


def flag_of(field: str) -> str:
    """The ``tpusim serve`` flag that sets option ``field`` (its name or alias;
    generated from the field)."""
    for name, info in ServeOptions.model_fields.items():
        if field in (name, info.alias):
            return "--fidelity" if name == "network" else model_flag(name, info)
    return "--" + field.replace("_", "-")


def flagged(text: str, mentions: Iterable[str]) -> str:
    """``text`` with the options it ``mentions`` (field names) as their flags; a name
    inside a longer word or a quoted value (``'vllm-tpu-inference'``) stays as it is."""
    names = sorted(set(mentions), key=len, reverse=True)
    if not names:
        return text
    alone = r"[\w'\"-]"
    pattern = rf"(?<!{alone})(" + "|".join(re.escape(n) for n in names) + rf")(?!{alone})"
    return re.sub(pattern, lambda match: flag_of(match.group(1)), text)


class ServeCommand(BaseModel):
    """What only ``tpusim serve``'s command line has, besides the options
    (:class:`~tpusim.serving.options.ServeOptions`): the systems, the model (or
    ``--vllm``'s), a latency curve and its plot, JSON."""

    system: str = Field(
        description="shipped system name or YAML path (with --rates: several, comma-separated)",
        json_schema_extra={"positional": True},
    )
    model: str | None = Field(
        None, description=f"{ServeOptions.model_fields['model'].description} (or --vllm's model)"
    )
    rates: str | None = Field(
        None,
        description="a latency curve: requests/s R1,R2,... (or 'auto')",
        json_schema_extra={"flag_type": "path"},
    )
    plot: str | None = Field(
        None,
        description="with --rates: write the curve to PLOT.png and PLOT.svg",
        json_schema_extra={"flag_type": "plot"},
    )
    as_json: bool = Field(False, alias="json", description="print one JSON object")


def add_parsers(sub: Subparsers) -> None:
    """``tpusim serve`` on the CLI's subparsers: one flag per field of
    :class:`~tpusim.serving.options.ServeOptions` and the network flags."""
    p = sub.add_parser("serve")
    add_model_flags(p, ServeOptions, skip=("network", "model"))
    add_model_flags(p, ServeCommand)
    add_network_flags(p)
    p.set_defaults(func=cmd_serve)


def options_of(args: argparse.Namespace) -> ServeOptions:
    """The options the flags give (flags not given take the model's defaults). Raises
    InputError naming the flag of the first bad value."""
    given = model_values(args, ServeOptions, skip=("network",))
    try:
        return ServeOptions.model_validate(given | {"network": network_of(args)})
    except ValidationError as exc:
        raise InputError(_flag_problem(exc.errors()[0])) from None


def _flag_problem(error: ErrorDetails) -> str:
    """One validation error of the options as ``--flag: problem``."""
    mentions = (error.get("ctx") or {}).get("mentions", ())
    message = flagged(error["msg"].removeprefix("Value error, "), mentions)
    if error["loc"]:
        return f"{flag_of(str(error['loc'][0]))}: {message}"
    return f"tpusim serve: {message}"


def _check(args: argparse.Namespace) -> None:
    """The flags only the command line has: ``--rates`` (a latency curve) and ``--plot``."""
    if args.disaggregate and args.rates:
        raise InputError("tpusim serve: --rates runs colocated replicas; drop --disaggregate")
    if args.plot and not args.rates:
        raise InputError("tpusim serve: --plot draws the --rates curve; give --rates")
    if args.rates and (args.find_capacity or args.trace):
        raise InputError("tpusim serve: --rates takes no --find-capacity or --trace")
    if args.concurrency and args.rates:
        raise InputError("tpusim serve: --concurrency caps one stream; it takes no --rates")
    if args.rate is not None and args.rates:
        raise InputError("tpusim serve: --rates gives the rates of the curve; drop --rate")


def cmd_serve(args: argparse.Namespace) -> None:
    options = options_of(args)
    _check(args)
    try:
        _serve(args, options)
    except OptionError as exc:
        flags = " + ".join(flag_of(f) for f in exc.fields)
        raise InputError(f"{flags}: {flagged(exc.problem, exc.mentions)}") from None


#: The serving run (the engine and the workloads), imported only when a server runs.
_SERVE = Later("tpusim.serving.run", "serve")
_CURVES = Later("tpusim.serving.run", "curves")


def _serve(args: argparse.Namespace, options: ServeOptions) -> None:
    if args.rates:
        systems = [s for s in args.system.split(",") if s]
        rates = rates_flag(args.rates, options.requests)
        curve = _CURVES(options, systems, rates, args.plot)
        chips = {system.name: system.chip.name for system in map(_system, systems)}
        curve["curve"] = [p | _serving_intervals(p, chips[p["system"]]) for p in curve["curve"]]
        _print_curve(args, curve)
        return
    if "," in args.system:
        raise InputError("tpusim serve: several systems need --rates (a latency curve each)")
    row = _SERVE(options, args.system)
    row |= _serving_intervals(row, _system(args.system).chip.name)
    if args.as_json:
        print(json_text(row))
    else:
        print(format_row(row))


def _system(system: str) -> System:
    """``system`` (a shipped name or a YAML path; it has loaded by now)."""
    from tpusim.config.loader import load_system

    return load_system(system)


def _serving_intervals(row: dict[str, Any], chip: str) -> dict[str, Any]:
    """The 80% intervals of the run's cost-model figures (``x_interval``, the
    ``serving`` workload's columns) and their ``interval_basis``."""
    from tpusim.results.intervals import json_intervals
    from tpusim.workloads.serving import ServingRecord

    return json_intervals(row, ServingRecord.interval_columns, chip)


def format_row(row: dict[str, Any]) -> str:
    """The readable table of a run: one ``name  value unit`` line per figure."""
    lines = [
        f"{row['model']} on {row['system']} (tp {row['tp']}, ep {row['ep']}, "
        f"{row['dtype']}, KV in {row['kv_cache']})"
    ]
    if row.get("server_terms"):  # the profile, and whether this chip's terms are borrowed
        lines.append(f"  {'server':<30} {row['server_terms']}")
    row = row | {"replicas x chips": f"{row['replicas']} x {row['chips_per_replica']}"}
    for name, unit in TABLE_FIELDS:
        if name not in row or (name == "concurrency" and row[name] is None):
            continue
        value = row[name]
        if name == "rate_per_s" and value is None:
            value = "inf"  # every request at 0 (JSON: null)
        text = _num(value) + (f" {unit}" if unit and value is not None else "")
        lines.append(f"  {name:<30} {text}{range_text(row, name, _num)}")
    if row.get(BASIS):
        lines.append(f"  (80% intervals: {row[BASIS]})")
    return "\n".join(lines)


def rates_flag(text: str, requests: int = DEFAULT_REQUESTS) -> list[float] | None:
    """``--rates``: ``auto`` (None) or positive requests/s, comma-separated, at most
    MAX_CURVE_RATES of them, each within the limit ``--rate`` obeys for ``requests``."""
    if text == "auto":
        return None
    parts = text.split(",")
    if len(parts) > MAX_CURVE_RATES:
        raise InputError(
            f"tpusim serve: --rates: {len(parts):,} rates, over the limit of {MAX_CURVE_RATES}"
        )
    try:
        rates = [float(x) for x in parts]
    except ValueError:
        raise InputError(f"tpusim serve: --rates: not numbers: {text!r}") from None
    if not rates or any(not 0 < r < float("inf") for r in rates):
        raise InputError(f"tpusim serve: --rates must be positive numbers, got {text!r}")
    for rate in rates:
        problem = stream_span_problem(rate, requests)
        if problem is not None:
            raise InputError(f"tpusim serve: --rates: {problem}")
    return rates


def _print_curve(args: argparse.Namespace, row: dict[str, Any]) -> None:
    if args.as_json:
        print(json_text(row))
        return
    columns = (
        "system",
        "rate_per_s",
        "ttft_p50_s",
        "ttft_p99_s",
        "tpot_p50_s",
        "tpot_p99_s",
        "tokens_per_s_per_chip",
        "preemptions",
    )
    first = row["systems"][0]
    print(f"{first['model']} (tp {first['tp']}, ep {first['ep']}, {first['dtype']})")
    print("  ".join(f"{c:>22}" for c in columns))
    for point in row["curve"]:
        print("  ".join(f"{_num(point.get(c)):>22}" for c in columns))
    if any(point.get(BASIS) for point in row["curve"]):
        print("(80% intervals: --json gives each point's x_interval and interval_basis)")
    if row.get("plot"):
        print(f"wrote {row['plot']}")


def _num(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
