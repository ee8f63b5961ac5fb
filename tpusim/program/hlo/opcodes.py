"""HLO opcodes by what they cost: FLOPs per element, bytes only, nothing, or a call.

These sets follow XLA's ``HloCostAnalysis``: elementwise arithmetic is 1 FLOP per output
element, transcendentals and data movement cost no FLOPs (they are costed by bytes).
An opcode in none of them is *unknown*: costed as an elementwise op by its result
bytes and counted in ``HloModule.unknown_ops``, never an import failure.
"""

from __future__ import annotations

from tpusim.vocabulary import Op


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: The collective opcodes the importer records (HLO's names are the vocabulary's).
COLLECTIVE_KINDS: tuple[Op, ...] = (
    "all-reduce",
    "all-gather",
    "reduce-scatter",
    "all-to-all",
    "collective-permute",
)
#: 1 FLOP per output element (XLA's HloCostAnalysis counts these as flops).
ELEMENTWISE_FLOP_OPS = _words(
    "add subtract multiply divide maximum minimum compare select negate abs remainder "
    "and or xor not clamp sign floor ceil round-nearest-afz round-nearest-even "
    "shift-left shift-right-arithmetic shift-right-logical atan2 is-finite"
)
#: Transcendentals: no FLOPs (XLA reports them separately), costed by bytes.
TRANSCENDENTAL_OPS = _words(
    "exponential exponential-minus-one log log-plus-one logistic tanh sqrt rsqrt cbrt power "
    "sine cosine tan erf"
)
#: Zero-cost ops: they become no Op, dependencies pass through them.
PASS_THROUGH_OPS = _words(
    "parameter constant get-tuple-element tuple bitcast copy opt-barrier partition-id "
    "replica-id after-all iota copy-start copy-done add-dependency domain slice-done "
    "custom-call-start"
)
#: Data movement and other known ops: no FLOPs, costed by bytes.
MOVEMENT_OPS = _words(
    "broadcast reshape transpose slice dynamic-slice dynamic-update-slice concatenate pad "
    "gather scatter convert bitcast-convert reverse sort select-and-scatter reduce-window "
    "reduce-precision rng rng-bit-generator rng-get-and-update-state custom-call infeed "
    "outfeed send send-done recv recv-done batch-norm-training batch-norm-inference "
    "batch-norm-grad cholesky triangular-solve fft real imag complex map clz popcnt "
    "stochastic-convert top-k set-dimension-size get-dimension-size optimization-barrier "
    "collective-broadcast all-reduce-done all-gather-done collective-permute-done "
    "async-update async-done slice-start call-done custom-call-update custom-call-done "
    "dynamic-slice-start dynamic-slice-done dynamic-update-slice-start "
    "dynamic-update-slice-done"
)
#: Ops whose cost is that of the computation(s) they call (``calls=`` / ``to_apply=``).
CALL_OPS = frozenset({"fusion", "call", "async-start", "call-start", "custom-call"})
#: Control flow: the called computations run as part of the program, not inside one op.
CONTROL_FLOW_OPS = frozenset({"while", "call", "conditional"})
#: Ops that reduce their input: 1 FLOP per input element.
REDUCING_OPS = frozenset({"reduce", "all-reduce", "all-reduce-start", "reduce-scatter"})
KNOWN_OPS = (
    ELEMENTWISE_FLOP_OPS
    | TRANSCENDENTAL_OPS
    | PASS_THROUGH_OPS
    | MOVEMENT_OPS
    | CALL_OPS
    | {"dot", "convolution", "reduce", "while", "conditional"}
    | set(COLLECTIVE_KINDS)
    | {f"{k}-start" for k in COLLECTIVE_KINDS}
    | {f"{k}-done" for k in COLLECTIVE_KINDS}
)


def collective_kind(opcode: str) -> tuple[Op, bool] | None:
    """(kind, is_async_start) of a collective opcode; None for other ops and for ``-done``."""
    return _COLLECTIVE_OPCODES.get(opcode)


_COLLECTIVE_OPCODES: dict[str, tuple[Op, bool]] = {
    **{kind: (kind, False) for kind in COLLECTIVE_KINDS},
    **{f"{kind}-start": (kind, True) for kind in COLLECTIVE_KINDS},
}
