"""``tpusim serve SYSTEM --model NAME``: an inference service at a request rate, or its
capacity at an SLO (``--find-capacity``).

A thin parser: the flags fill a :class:`~tpusim.serving.options.ServeOptions` (each
flag's ``dest`` is the field it sets; defaults are the model's), and the model's errors,
which name fields (the one to blame and those they mention), come back naming the flags.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from tpusim.cli.flags import fidelities, path_flag, plot_flag
from tpusim.config.limits import MAX_CURVE_RATES
from tpusim.errors import InputError
from tpusim.results.files import json_text
from tpusim.serving.option_error import OptionError
from tpusim.serving.options import DEFAULT_REQUESTS, ServeOptions, stream_span_problem
from tpusim.vocabulary import DTYPES

TABLE_FIELDS = (
    ("replicas x chips", None),
    ("requests", None),
    ("completed", None),
    ("rejected", None),
    ("rate_per_s", "req/s"),
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


#: The flags whose name is not ``--`` and the field's name with dashes.
FLAGS = {
    "max_sequences": "--max-seqs",
    "acceptance": "--acceptance-rate",
    "overheads": "--no-overheads",
    "async_scheduling": "--no-async-scheduling",
    "power_per_chip_W": "--power-per-chip",
    "price_per_chip_hour_usd": "--price-per-chip-hour",
}


def flag_of(field: str) -> str:
    """The ``tpusim serve`` flag that sets option ``field``."""
    return FLAGS.get(field, "--" + field.replace("_", "-"))


def flagged(text: str, mentions: Iterable[str]) -> str:
    """``text`` with the options it ``mentions`` (field names) as their flags."""
    names = sorted(set(mentions), key=len, reverse=True)
    if not names:
        return text
    pattern = r"\b(" + "|".join(re.escape(n) for n in names) + r")\b"
    return re.sub(pattern, lambda match: flag_of(match.group(1)), text)


def _default(field: str) -> Any:
    return ServeOptions.model_fields[field].default


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def _rate(text: str) -> float:
    """``--rate``: a finite number > 0, or ``inf`` (all requests at once)."""
    if text.strip().lower() in ("inf", "infinity"):
        return float("inf")
    return _positive_float(text)


def _time(text: str) -> float:
    from tpusim.units import parse_time

    try:
        value = parse_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def add_parsers(sub: Any) -> None:
    """``tpusim serve`` on the CLI's subparsers."""
    p = sub.add_parser("serve", help="an LLM inference service: latency at a rate, or capacity")
    p.add_argument(
        "system", help="shipped system name or YAML path (with --rates: several, comma-separated)"
    )
    p.add_argument("--model", required=True, help="model preset name or YAML path")
    _deployment_flags(p)
    _engine_flags(p)
    _stream_flags(p)
    _search_flags(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_serve)


def _deployment_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--chips", type=_positive_int, help="chips per replica (default: fewest)")
    p.add_argument("--tp", type=_positive_int, help="tensor-parallel degree")
    p.add_argument("--ep", type=_positive_int, help="expert-parallel degree (MoE)")
    replicas = _default("replicas")
    p.add_argument("--replicas", type=_positive_int, help=f"model replicas ({replicas})")
    p.add_argument(
        "--disaggregate",
        metavar="P:D",
        help="P prefill and D decode replicas, KV moved over the network (replaces --replicas)",
    )
    p.add_argument(
        "--dtype", choices=DTYPES, default=_default("dtype"), help="weights, activations, KV"
    )
    p.add_argument(
        "--kv-cache",
        choices=("hbm", "sram", "tiered"),
        default=_default("kv_cache"),
        help="KV cache tier (tiered: SRAM first, then HBM)",
    )
    p.add_argument(
        "--block-size",
        type=_positive_int,
        default=_default("block_size"),
        help="tokens per KV block",
    )
    p.add_argument(
        "--max-tokens",
        type=_positive_int,
        default=_default("max_tokens"),
        help="token budget per iteration (%(default)s)",
    )
    p.add_argument(
        "--max-seqs",
        dest="max_sequences",
        metavar="MAX_SEQS",
        type=_positive_int,
        default=_default("max_sequences"),
        help="sequences per iteration (%(default)s)",
    )


def _engine_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fidelity", choices=fidelities(), default="flow")
    p.add_argument(
        "--draft-tokens",
        type=int,
        metavar="K",
        help="speculative decoding: K draft tokens verified per decode iteration (0: off)",
    )
    p.add_argument(
        "--acceptance-rate",
        dest="acceptance",
        type=float,
        metavar="A",
        help="speculative decoding: each draft accepted with probability A",
    )
    p.add_argument(
        "--expert-imbalance",
        type=float,
        metavar="F",
        help="MoE: busiest expert-parallel rank's routed tokens over the mean (1: uniform)",
    )
    p.add_argument(
        "--server",
        metavar="NAME",
        help=f"server profile: shipped name or YAML path (default {_default('server')}; "
        "configs/servers/)",
    )
    p.add_argument(
        "--no-async-scheduling",
        dest="async_scheduling",
        action="store_false",
        default=None,
        help="the host schedules between iterations (adds its time to each; default: the "
        "server profile's scheduling mode)",
    )
    p.add_argument(
        "--no-overheads",
        dest="overheads",
        action="store_false",
        help="iteration time from the chip and network alone (no host, HBM efficiency, sampler)",
    )


def _stream_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rate", type=_rate, help="requests/s (default 1; inf: every request at once)")
    p.add_argument(
        "--concurrency",
        type=_positive_int,
        metavar="N",
        help="a closed loop of N clients (vLLM's benchmark --max-concurrency)",
    )
    p.add_argument("--arrival", choices=("poisson", "gamma"), default=_default("arrival"))
    p.add_argument("--burstiness", type=_positive_float, help="gamma CV (1)")
    p.add_argument("--trace", help="CSV of arrival_s,prompt_tokens,output_tokens")
    p.add_argument("--requests", type=_positive_int, help=f"({_default('requests')})")
    tokens = "a whole number or YAML: '{uniform: [LO, HI]}', '{lognormal: {median: M, sigma: S}}'"
    p.add_argument("--prompt-tokens", help=f"{tokens} ({_default('prompt_tokens')})")
    p.add_argument("--output-tokens", help=f"{tokens} ({_default('output_tokens')})")
    p.add_argument("--seed", type=int, help="seeds arrivals and token counts (0)")
    p.add_argument(
        "--prefix-tokens",
        type=int,
        metavar="P",
        help="a shared prompt prefix of P tokens held in the prefix cache (0: none)",
    )
    p.add_argument(
        "--prefix-hit-rate",
        type=float,
        metavar="H",
        help="fraction of the requests whose prompt starts with that prefix",
    )


def _search_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--find-capacity", action="store_true", help="bisect the rate to the SLO")
    p.add_argument(
        "--rates", type=path_flag, help="a latency curve: requests/s R1,R2,... (or 'auto')"
    )
    p.add_argument(
        "--plot", type=plot_flag, help="with --rates: write the curve to PLOT.png and PLOT.svg"
    )
    p.add_argument("--slo-ttft", type=_time, help="p99 time-to-first-token SLO, e.g. 2s")
    p.add_argument("--slo-tpot", type=_time, help="p99 time-per-output-token SLO, e.g. 50ms")
    p.add_argument(
        "--power-per-chip",
        dest="power_per_chip_W",
        metavar="POWER_PER_CHIP",
        type=_positive_float,
        help="all-in W per chip",
    )
    p.add_argument(
        "--price-per-chip-hour",
        dest="price_per_chip_hour_usd",
        metavar="PRICE_PER_CHIP_HOUR",
        type=_positive_float,
        help="USD per chip-hour",
    )


def options_of(args: argparse.Namespace) -> ServeOptions:
    """The options the flags give (flags not given take the model's defaults). Raises
    InputError naming the flag of the first bad value."""
    given = {k: v for k, v in vars(args).items() if k in ServeOptions.model_fields}
    try:
        return ServeOptions(**{k: v for k, v in given.items() if v is not None})
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
        raise InputError("tpusim serve: --concurrency runs a closed loop; it takes no --rates")
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


def _serve(args: argparse.Namespace, options: ServeOptions) -> None:
    from tpusim.serving.run import curves, serve

    if args.rates:
        systems = [s for s in args.system.split(",") if s]
        rates = rates_flag(args.rates, options.requests)
        _print_curve(args, curves(options, systems, rates, args.plot))
        return
    if "," in args.system:
        raise InputError("tpusim serve: several systems need --rates (a latency curve each)")
    row = serve(options, args.system)
    if args.json:
        print(json_text(row))
    else:
        print(format_row(row))


def format_row(row: dict[str, Any]) -> str:
    """The readable table of a run: one ``name  value unit`` line per figure."""
    lines = [
        f"{row['model']} on {row['system']} (tp {row['tp']}, ep {row['ep']}, "
        f"{row['dtype']}, KV in {row['kv_cache']})"
    ]
    row = row | {"replicas x chips": f"{row['replicas']} x {row['chips_per_replica']}"}
    for name, unit in TABLE_FIELDS:
        if name not in row:
            continue
        value = row[name]
        text = f"{value:.4g}" if isinstance(value, float) else str(value)
        lines.append(f"  {name:<30} {text}{' ' + unit if unit and value is not None else ''}")
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
    if args.json:
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
    if row.get("plot"):
        print(f"wrote {row['plot']}")


def _num(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
