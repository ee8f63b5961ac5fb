"""Limits on input size, each checked before anything is allocated or run.

Every limit is far above what a real TPU system, scenario or file needs and far
below what would exhaust memory or run for hours; each says why its value and, where
a real user might need more, how to raise it. Grade of every value: assumption
(chosen for this tool, not measured or published).
"""

from __future__ import annotations

import math

#: Largest YAML file read (bytes). Shipped configs and scenarios are under 20 kB and
#: measurement files under 100 kB; parsing 10 MB of YAML takes seconds, 50 MB minutes.
MAX_YAML_BYTES = 10_000_000

#: Most YAML nodes in one file, counting every alias as the nodes it expands to. A
#: "billion laughs" alias bomb is a few hundred bytes that expand to 10^9 nodes; the
#: largest shipped file has under 5,000 nodes.
MAX_YAML_NODES = 100_000

#: Deepest nesting of YAML mappings and lists. Configs nest under 10 deep; deeper
#: input would exhaust Python's recursion in the parser and validators.
MAX_YAML_DEPTH = 100

#: Most chips in one topology (one pod). Seven times the largest shipped pod (TPU 8t,
#: 9,600 chips); a collective's flows grow faster than its chips (a 32,768-chip torus
#: all-reduce: 6 million flows, 2 GB, half a minute; 196,608 chips: over 20 GB).
MAX_CHIPS = 65_536

#: Most chips in a multi-pod system (pods x chips per pod). Over TPU 8t Virgo
#: (134,400 chips, the largest shipped system).
MAX_SYSTEM_CHIPS = 200_000

#: Most chips on one torus axis. A real TPU torus axis has at most 28 chips (v5p); a
#: ring of n chips takes ~2n collective steps, so a 100,000-chip line takes hours.
MAX_AXIS_CHIPS = 4_096

#: Most chips in a Boardfly. The TPU 8i pod has 1,152; its metrics and routes cost
#: grows with the square of the chips (8,192 chips take seconds, 20,000 half a minute),
#: so 16,384 chips (14 times the pod) keep ``tpusim topo`` within about ten seconds.
MAX_BOARDFLY_CHIPS = 16_384

#: Most bidirectional links in one topology: 200,000 chips of 8 ports each, over the
#: 6 ICI ports of a 3D torus chip and the links of Boardfly's fully connected groups.
MAX_LINKS = 1_600_000

#: Slowest accepted link (bytes/s, one direction). 1 kB/s is a million times slower
#: than any interconnect; below it a 1 GiB collective takes over 10 days.
MIN_LINK_BANDWIDTH_BPS = 1e3

#: Fastest accepted link (bytes/s, one direction): 1 PB/s, over 1,000 times the
#: fastest ICI link (TPU 8t). Faster links make transfer times fall below the float
#: resolution of the simulation clock, so the event loop would stop advancing.
MAX_LINK_BANDWIDTH_BPS = 1e15

#: Longest accepted hop latency (s). ICI hops take about a microsecond and data-centre
#: hops tens of microseconds; a second per hop is already a WAN round trip.
MAX_HOP_LATENCY_S = 1.0

#: Most sweep points in one scenario or one ``--sweep-bytes``. A point simulates one
#: workload on every system (a second or more each): 1,000 points is already about an
#: hour. Raise it with ``--max-points`` (``tpusim run``, ``tpusim collective``) or
#: ``max_points:`` in the scenario.
MAX_SWEEP_POINTS = 1_000

#: Most chips simulated at packet fidelity (one SimPy event per packet per hop). A
#: 4,096-chip v4 pod is the largest a packet run finishes in minutes; use flow fidelity.
MAX_PACKET_CHIPS = 4_096

#: Most packet-hops a packet-fidelity collective may need (estimated before running as
#: chips x max(2 x ceil(bytes / packet_bytes), the fewest transfers a chip sends), a
#: ring all-reduce's count when packets are small, one packet per transfer when they
#: are larger than the message). About 20 us of wall time each: 2 million is under a
#: minute. Use larger packets or flow fidelity.
MAX_PACKET_HOPS = 2_000_000


#: Largest size accepted anywhere (bytes): a collective's message, a memory, a job's
#: data. 1 PB is over half a TPU pod's HBM (9,216 x 192 GB = 1.77 PB) and 3,000 times
#: the largest chip's (TPU 8i, 288 GB); a 1 PB all-reduce already takes hours, and
#: sizes past it are typos (1e30 B would report 10^19 s).
MAX_BYTES = 1e15


#: Largest ``slowdown`` of a slow chip. A straggler runs a few times slower (thermal
#: throttling, a bad HBM stack: 1.1x to 3x); 1,000x is a chip that has all but stopped,
#: past which results are meaningless (1e300 gives 10^294 s), so use ``chip_down``.
MAX_SLOWDOWN = 1_000.0

#: Smallest ``bandwidth_fraction`` of a degraded link: a millionth of a 100 GB/s link
#: is 100 kB/s, a link that has all but failed, past which times are meaningless
#: (1e-300 gave 10^295 s), so use ``link_down``.
MIN_BANDWIDTH_FRACTION = 1e-6


#: Widest MXU side accepted in a chip file. Real MXUs are 128 x 128 (v4, v5e) or
#: 256 x 256 (v6e on); a side of 1e9 would pad every matmul to 10^18 MACs.
MAX_MXU_SIZE = 4_096

#: Most TensorCores per chip and MXUs per TensorCore. Shipped chips have 1-2 and 2-4;
#: 1,024 keeps a typo (2e9) from becoming a peak no roofline is costed against.
MAX_UNITS_PER_CHIP = 1_024

#: Lowest and highest accepted FLOP/s (a peak or the vector unit's rate, per chip).
#: TPUs peak between 10^14 (v4 bf16) and 10^16 (TPU 8t fp4) FLOP/s and their vector
#: units run at ~10^13; 1 GFLOP/s is a thousand times below any of them (1e-300 would
#: cost a softmax 10^300 s) and 10^18 a hundred times above the fastest (1e40: 0 s).
MIN_FLOPS = 1e9
MAX_FLOPS = 1e18

#: Largest accepted memory tier (bytes, one chip's HBM or SRAM). 10 TB is 35 times the
#: largest shipped HBM (TPU 8i, 288 GB); 1e30 B would make every model fit.
MAX_MEMORY_BYTES = 1e13

#: Highest all-in power per chip (W) and price per chip-hour (USD) accepted. A TPU
#: draws ~1 kW all-in (host and cooling share) and rents for a few USD an hour;
#: 100 kW and 10,000 USD are 100 times above and keep energy and cost finite (1e308 W
#: overflows to inf).
MAX_POWER_PER_CHIP_W = 1e5
MAX_PRICE_PER_CHIP_HOUR_USD = 1e4

#: Most rates in one ``--rates`` latency curve. Each rate simulates a whole request
#: stream (seconds each); 100 draws a smooth curve, 2,000 runs for hours.
MAX_CURVE_RATES = 100

#: Largest KV block (tokens). vLLM pages 16 tokens and allows up to a few hundred; a
#: block of 65,536 tokens already holds more than most contexts.
MAX_BLOCK_SIZE = 65_536


#: Shortest and longest published training step accepted (s). A whole step of a model
#: anyone publishes takes milliseconds at least (its weights' read alone), so a
#: shorter one is a unit slip (``ms`` written ``ns``); the longest published steps are
#: tens of seconds (GPT-3 175B on v6e-256: 17 s), so over an hour is a typo (1e30 s).
MIN_MEASURED_STEP_S = 1e-3
MAX_MEASURED_STEP_S = 3_600.0

#: Most tokens per training step (global batch x sequence length). Llama 3 trained at
#: 16 million tokens a step; 10^10 is 600 times that, and a batch of 2.3e18 sequences
#: is a typo whose plan would report exbibytes of activations.
MAX_STEP_TOKENS = 10_000_000_000

#: Most routed experts (and shared experts) in a MoE layer. DeepSeek-V3 routes among
#: 256 and Qwen3 among 128; 65,536 is 256 times the largest, and 10^9 experts is a
#: typo whose weights no system holds.
MAX_EXPERTS = 65_536

#: Most layers of a model (a preset, a workload's ``layers``). The deepest published
#: models have about 100-200 (Llama 3.1 405B: 126; GPT-3: 96); the planner and the
#: memory model walk the layers of every candidate layout, so 2^31 layers ran for ever
#: (``plan`` of a 1,000-layer model takes about 20 s of CPU). Grade: assumption (8
#: times the deepest published model).
MAX_LAYERS = 1_000

#: Most worker processes one command starts (``plan --workers``, ``validate --jobs``).
#: Each is a Python process of a few hundred MB; 256 is more cores than any host has.
MAX_WORKERS = 256

#: Most layouts ``plan`` ranks by simulation (``--shortlist``): each is a simulated
#: step, a second or more; 1,000 is already a quarter of an hour on two workers.
MAX_SHORTLIST = 1_000

#: Bounds on a published serving figure: throughput (output tokens/s, requests/s) at
#: most 10^9 tokens/s and 10^7 requests/s, a thousand times a whole pod's; latencies
#: (TTFT, TPOT) between 1 us and an hour. Past them a figure is a unit slip or a typo
#: (a measured 1e30 tokens/s reports a -100% error and breaks the fit's log loss).
MAX_MEASURED_TOKENS_PER_S = 1e9
MAX_MEASURED_REQUESTS_PER_S = 1e7
MIN_MEASURED_LATENCY_S = 1e-6
MAX_MEASURED_LATENCY_S = 3_600.0


def measured_figure_problem(metric: str, value: float) -> str | None:
    """Why ``value`` of a serving ``metric`` (``*_per_s`` a rate, ``*_s`` a latency in
    s) is outside the limits above, or None."""
    if metric.endswith("_per_s"):
        most = MAX_MEASURED_TOKENS_PER_S if "tokens" in metric else MAX_MEASURED_REQUESTS_PER_S
        if value > most:
            return f"{value:g} is over the limit of {most:g} (a unit slip or a typo?)"
        return None
    if not MIN_MEASURED_LATENCY_S <= value <= MAX_MEASURED_LATENCY_S:
        return (
            f"{value:g} s is outside {MIN_MEASURED_LATENCY_S:g} s to "
            f"{MAX_MEASURED_LATENCY_S:g} s (a unit slip or a typo?)"
        )
    return None


def measured_step_problem(step_s: float) -> str | None:
    """Why a published training step of ``step_s`` seconds is implausible, or None."""
    if step_s < MIN_MEASURED_STEP_S:
        return (
            f"{step_s:g} s is under {MIN_MEASURED_STEP_S:g} s (a whole training step; a unit slip?)"
        )
    if step_s > MAX_MEASURED_STEP_S:
        return f"{step_s:g} s is over {MAX_MEASURED_STEP_S:g} s (an hour per step; a typo?)"
    return None


#: Serving streams. Largest token count of a request (2^31 - 1, far above any model's
#: context; larger counts would overflow the simulator's int64 arithmetic on sums).
MAX_TOKEN_COUNT = 2**31 - 1
#: Most requests in one stream (about 200 bytes of state each, so 1,000,000 requests
#: hold about 200 MB; a capacity search runs the stream a dozen times).
MAX_REQUESTS = 1_000_000

#: Most bytes read of a request trace (``--trace``, ``trace:``): MAX_REQUESTS rows of
#: ``arrival_s,prompt_tokens,output_tokens`` take about 40 bytes each; 64 MiB is room
#: for that and stops an endless file (``/dev/zero``, a FIFO) before memory runs out.
MAX_TRACE_BYTES = 64 * 2**20
#: Longest expected stream, ``requests / rate`` in seconds: at 1e9 s the float64 clock
#: still resolves 0.25 us, far below one iteration (slower rates lose the iteration
#: times to rounding and report zero latencies). ``rate``, ``--rates`` and every
#: validated figure's rate obey it (:func:`stream_span_problem`).
MAX_STREAM_SPAN_S = 1e9
#: Most draft tokens per decode iteration (speculative decoding proposes a handful;
#: vLLM's examples use 1-10).
MAX_DRAFT_TOKENS = 64
#: Most requests a published serving figure simulates, and most tokens per request
#: (the shipped benchmarks send 1,000 to 3,000 requests of 2,000 tokens).
MAX_SIMULATED_REQUESTS = 20_000
MAX_FIGURE_TOKENS = 1_000_000


def stream_span_problem(rate_per_s: float, requests: int) -> str | None:
    """Why an open loop at ``rate_per_s`` of ``requests`` requests cannot be simulated
    (it spans more than MAX_STREAM_SPAN_S), or None: the limit ``rate`` and every rate
    of a ``--rates`` curve obey."""
    if requests / rate_per_s > MAX_STREAM_SPAN_S:
        return (
            f"{rate_per_s:g} req/s spreads {requests} requests over more than "
            f"{MAX_STREAM_SPAN_S:g} s, past the clock's resolution"
        )
    return None


def whole_bytes_problem(value: float) -> str | None:
    """Why ``value`` (bytes) is not a usable size, or None: finite, > 0, whole, at most
    MAX_BYTES."""
    if not math.isfinite(value):
        return f"{value} is not a finite number of bytes"
    if value <= 0:
        return "must be > 0 bytes"
    if value > MAX_BYTES:
        return f"{value:.3g} bytes is over the limit of {MAX_BYTES:.0e} bytes (1 PB)"
    if value != math.floor(value):
        return f"{value:g} is not a whole number of bytes"
    return None


def packet_work_problem(
    num_chips: int, size_bytes: float, packet_bytes: float, sends_per_chip: int = 0
) -> str | None:
    """Why a packet-fidelity collective of ``size_bytes`` per chip over ``num_chips``
    chips with ``packet_bytes`` packets is too large to simulate, or None.
    ``sends_per_chip``: the fewest transfers each chip sends (at least one packet each;
    with ``auto``, the most over the algorithms it may simulate)."""
    if num_chips > MAX_PACKET_CHIPS:
        return (
            f"packet fidelity on {num_chips:,} chips is over the limit of "
            f"{MAX_PACKET_CHIPS:,} (one event per packet per hop); use the flow fidelity"
        )
    by_size = 2 * math.ceil(size_bytes / packet_bytes)
    hops = num_chips * max(by_size, sends_per_chip)
    if hops <= MAX_PACKET_HOPS:
        return None
    how = "larger packets (packet_bytes)"
    if sends_per_chip > by_size:  # one packet per transfer already: packets do not help
        how = f"an algorithm with fewer transfers ({sends_per_chip:,} per chip counted)"
    return (
        f"packet fidelity would simulate about {hops:,} packet-hops, over the limit of "
        f"{MAX_PACKET_HOPS:,}; use {how} or the flow fidelity"
    )


def points_problem(count: int, limit: int, how: str) -> str | None:
    """Why ``count`` sweep points are too many under ``limit``, or None; ``how`` says
    how to raise the limit."""
    if count > limit:
        return f"{count:,} sweep points, over the limit of {limit:,} ({how})"
    return None
