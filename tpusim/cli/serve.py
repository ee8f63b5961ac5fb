"""``tpusim serve SYSTEM --model NAME``: an inference service at a request rate, or its
capacity at an SLO (``--find-capacity``)."""

from __future__ import annotations

import argparse
from typing import Any

from tpusim.cli.flags import path_flag, plot_flag
from tpusim.errors import InputError
from tpusim.results.files import json_text
from tpusim.vocabulary import DTYPES, FIDELITIES

#: Default stream: 1,000 requests of 1,024 prompt and 256 output tokens at 1 req/s
#: (a design choice, in the range of vLLM's and MLPerf's serving benchmarks).
DEFAULT_REQUESTS = 1000
DEFAULT_PROMPT_TOKENS = "1024"
DEFAULT_OUTPUT_TOKENS = "256"

TABLE_FIELDS = (
    ("replicas x chips", None), ("requests", None), ("completed", None),
    ("rejected", None), ("rate_per_s", "req/s"), ("ttft_p50_s", "s"), ("ttft_p99_s", "s"),
    ("tpot_p50_s", "s"), ("tpot_p99_s", "s"), ("e2e_p50_s", "s"), ("e2e_p99_s", "s"),
    ("output_tokens_per_s", "tok/s"), ("tokens_per_s_per_chip", "tok/s"),
    ("kv_cache_capacity_tokens", "tokens"), ("preemptions", None),
    ("goodput_rate_per_s", "req/s"), ("kv_transfer_p50_s", "s"), ("capacity_rate_per_s", "req/s"),
    ("request_throughput_per_s", "req/s"), ("ttft_mean_s", "s"), ("tpot_mean_s", "s"),
    ("capacity_rate_per_s_per_chip", "req/s"),
)  # fmt: skip


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
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def _rate(text: str) -> float:
    """``--rate``: a finite number > 0, or ``inf`` (all requests at once)."""
    if text.strip().lower() in ("inf", "infinity"):
        return float("inf")
    return _positive_float(text)


def _split(text: str) -> tuple[int, int]:
    try:
        return split_flag(text)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("disaggregate: ")) from None


def split_flag(text: str) -> tuple[int, int]:
    """``P:D`` (prefill and decode replicas, whole numbers >= 1). Raises InputError."""
    parts = str(text).split(":")
    if len(parts) != 2 or not all(p.isdigit() and 1 <= int(p) <= 2**20 for p in parts):
        raise InputError(f"disaggregate: expected P:D, whole numbers >= 1, got {text!r}")
    return int(parts[0]), int(parts[1])


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
    _stream_flags(p)
    p.add_argument("--find-capacity", action="store_true", help="bisect the rate to the SLO")
    p.add_argument(
        "--rates", type=path_flag, help="a latency curve: requests/s R1,R2,... (or 'auto')"
    )
    p.add_argument(
        "--plot", type=plot_flag, help="with --rates: write the curve to PLOT.png and PLOT.svg"
    )
    p.add_argument("--slo-ttft", type=_time, help="p99 time-to-first-token SLO, e.g. 2s")
    p.add_argument("--slo-tpot", type=_time, help="p99 time-per-output-token SLO, e.g. 50ms")
    p.add_argument("--power-per-chip", type=_positive_float, help="all-in W per chip")
    p.add_argument("--price-per-chip-hour", type=_positive_float, help="USD per chip-hour")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_serve)


def _deployment_flags(p: argparse.ArgumentParser) -> None:
    from tpusim.serving.service import DEFAULT_MAX_SEQUENCES, DEFAULT_MAX_TOKENS

    p.add_argument("--chips", type=_positive_int, help="chips per replica (default: fewest)")
    p.add_argument("--tp", type=_positive_int, help="tensor-parallel degree")
    p.add_argument("--ep", type=_positive_int, help="expert-parallel degree (MoE)")
    p.add_argument("--replicas", type=_positive_int, default=1, help="model replicas (1)")
    p.add_argument(
        "--disaggregate", type=_split, metavar="P:D",
        help="P prefill and D decode replicas, KV moved over the network (replaces --replicas)",
    )  # fmt: skip
    p.add_argument("--dtype", choices=DTYPES, default="bf16", help="weights, activations, KV")
    p.add_argument(
        "--kv-cache", choices=("hbm", "sram", "tiered"), default="hbm",
        help="KV cache tier (tiered: SRAM first, then HBM)",
    )  # fmt: skip
    p.add_argument("--block-size", type=_positive_int, default=16, help="tokens per KV block")
    p.add_argument(
        "--max-tokens", type=_positive_int, default=DEFAULT_MAX_TOKENS,
        help="token budget per iteration (%(default)s)",
    )  # fmt: skip
    p.add_argument(
        "--max-seqs", type=_positive_int, default=DEFAULT_MAX_SEQUENCES,
        help="sequences per iteration (%(default)s)",
    )  # fmt: skip
    p.add_argument("--fidelity", choices=FIDELITIES, default="flow")
    p.add_argument(
        "--draft-tokens", type=int, default=0, metavar="K",
        help="speculative decoding: K draft tokens verified per decode iteration (0: off)",
    )  # fmt: skip
    p.add_argument(
        "--acceptance-rate", type=float, default=0.0, metavar="A",
        help="speculative decoding: each draft accepted with probability A",
    )  # fmt: skip
    p.add_argument(
        "--expert-imbalance", type=float, default=1.0, metavar="F",
        help="MoE: busiest expert-parallel rank's routed tokens over the mean (1: uniform)",
    )  # fmt: skip
    p.add_argument(
        "--no-async-scheduling", action="store_true",
        help="the host schedules between iterations (adds its time to each)",
    )  # fmt: skip
    p.add_argument(
        "--no-overheads", action="store_true",
        help="iteration time from the chip and network alone (no host, HBM efficiency, sampler)",
    )  # fmt: skip


def _stream_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rate", type=_rate, help="requests/s (default 1; inf: every request at once)")
    p.add_argument(
        "--concurrency", type=_positive_int, metavar="N",
        help="a closed loop of N clients (vLLM's benchmark --max-concurrency)",
    )  # fmt: skip
    p.add_argument("--arrival", choices=("poisson", "gamma"), default="poisson")
    p.add_argument("--burstiness", type=_positive_float, default=1.0, help="gamma CV")
    p.add_argument("--trace", help="CSV of arrival_s,prompt_tokens,output_tokens")
    p.add_argument("--requests", type=_positive_int, default=DEFAULT_REQUESTS, help="(%(default)s)")
    tokens = "a whole number or YAML: '{uniform: [LO, HI]}', '{lognormal: {median: M, sigma: S}}'"
    p.add_argument("--prompt-tokens", default=DEFAULT_PROMPT_TOKENS, help=tokens)
    p.add_argument("--output-tokens", default=DEFAULT_OUTPUT_TOKENS, help=tokens)
    p.add_argument("--seed", type=int, default=0, help="seeds arrivals and token counts")
    p.add_argument(
        "--prefix-tokens", type=int, default=0, metavar="P",
        help="a shared prompt prefix of P tokens held in the prefix cache (0: none)",
    )  # fmt: skip
    p.add_argument(
        "--prefix-hit-rate", type=float, default=0.0, metavar="H",
        help="fraction of the requests whose prompt starts with that prefix",
    )  # fmt: skip


def deployment_of(args: argparse.Namespace, system: str | None = None) -> Any:
    """The :class:`~tpusim.serving.Deployment` the flags describe (on ``system``, default
    the positional one)."""
    from tpusim.serving.service import Deployment

    return Deployment(
        system=system or args.system, model=args.model, tp=args.tp, ep=args.ep, chips=args.chips,
        replicas=args.replicas, dtype=args.dtype, kv_cache=args.kv_cache,
        block_size=args.block_size, max_tokens=args.max_tokens, max_sequences=args.max_seqs,
        fidelity=args.fidelity, overheads=not args.no_overheads,
        async_scheduling=not args.no_async_scheduling, prefix_tokens=args.prefix_tokens,
        draft_tokens=args.draft_tokens, acceptance=args.acceptance_rate,
        expert_imbalance=args.expert_imbalance,
    )  # fmt: skip


def _check(args: argparse.Namespace) -> None:
    if args.find_capacity and (args.slo_ttft is None or args.slo_tpot is None):
        raise InputError("tpusim serve: --find-capacity needs --slo-ttft and --slo-tpot")
    if args.find_capacity and args.trace:
        raise InputError("tpusim serve: --find-capacity varies the rate; it takes no --trace")
    if args.trace and args.rate is not None:
        raise InputError("tpusim serve: --trace gives the arrivals; drop --rate")
    if args.disaggregate and args.replicas != 1:
        raise InputError("tpusim serve: --disaggregate P:D sets the replicas; drop --replicas")
    if args.disaggregate and args.rates:
        raise InputError("tpusim serve: --rates runs colocated replicas; drop --disaggregate")
    if args.plot and not args.rates:
        raise InputError("tpusim serve: --plot draws the --rates curve; give --rates")
    if args.rates and (args.find_capacity or args.trace):
        raise InputError("tpusim serve: --rates takes no --find-capacity or --trace")
    if args.concurrency and (args.find_capacity or args.rates or args.disaggregate):
        raise InputError(
            "tpusim serve: --concurrency runs a closed loop; it takes no --find-capacity, "
            "--rates or --disaggregate"
        )


def cmd_serve(args: argparse.Namespace) -> None:
    from tpusim.serving.run import curves, serve

    _check(args)
    if args.rates:
        systems = [s for s in args.system.split(",") if s]
        _print_curve(args, curves(args, [deployment_of(args, s) for s in systems]))
        return
    if "," in args.system:
        raise InputError("tpusim serve: several systems need --rates (a latency curve each)")
    row = serve(args, deployment_of(args))
    if args.json:
        print(json_text(row))
    else:
        print(format_row(row))


def format_row(row: dict[str, Any]) -> str:
    """The readable table of a run: one ``name  value unit`` line per figure."""
    lines = [f"{row['model']} on {row['system']} (tp {row['tp']}, ep {row['ep']}, "
             f"{row['dtype']}, KV in {row['kv_cache']})"]  # fmt: skip
    row = row | {"replicas x chips": f"{row['replicas']} x {row['chips_per_replica']}"}
    for name, unit in TABLE_FIELDS:
        if name not in row:
            continue
        value = row[name]
        text = f"{value:.4g}" if isinstance(value, float) else str(value)
        lines.append(f"  {name:<30} {text}{' ' + unit if unit and value is not None else ''}")
    return "\n".join(lines)


def rates_flag(text: str) -> list[float] | None:
    """``--rates``: ``auto`` (None) or positive requests/s, comma-separated."""
    if text == "auto":
        return None
    try:
        rates = [float(x) for x in text.split(",")]
    except ValueError:
        raise InputError(f"tpusim serve: --rates: not numbers: {text!r}") from None
    if not rates or any(not 0 < r < float("inf") for r in rates):
        raise InputError(f"tpusim serve: --rates must be positive numbers, got {text!r}")
    return rates


def _print_curve(args: argparse.Namespace, row: dict[str, Any]) -> None:
    if args.json:
        print(json_text(row))
        return
    columns = ("system", "rate_per_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s",
               "tpot_p99_s", "tokens_per_s_per_chip", "preemptions")  # fmt: skip
    first = row["systems"][0]
    print(f"{first['model']} (tp {first['tp']}, ep {first['ep']}, {first['dtype']})")
    print("  ".join(f"{c:>22}" for c in columns))
    for point in row["curve"]:
        print("  ".join(f"{_num(point.get(c)):>22}" for c in columns))
    if row.get("plot"):
        print(f"wrote {row['plot']}")


def _num(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
