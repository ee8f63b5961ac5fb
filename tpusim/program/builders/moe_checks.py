"""Checks of the training step's MoE cost fields (see :func:`.mlp.moe_steps`)."""

from __future__ import annotations

from typing import Any

from tpusim.program.builders.layer_shape import DROPLESS
from tpusim.program.ir import ProgramError


def check_moe(args: Any, expert_chips: int = 1) -> None:
    """Raise :class:`ProgramError` for a bad MoE cost field of ``args`` (a
    :class:`~tpusim.program.builders.args.TrainingArgs`): ``capacity_factor`` > 0
    or -1 (dropless), at most ``experts`` and only with experts; dense dispatch
    (``sparse_matmul: false``) needs a capacity; ``routing_skew`` in [0, min(experts,
    ``expert_chips``) - 1] (``expert_chips``: the expert-parallel degree, the chips of a
    group that hold experts); a known ``expert_weight_dtype``."""
    cf = args.capacity_factor
    if cf <= 0 and cf != DROPLESS:
        raise ProgramError(f"capacity_factor must be > 0 or -1 (dropless), got {cf:g}")
    if cf != DROPLESS and args.experts == 0:
        raise ProgramError(f"capacity_factor {cf:g} needs experts (a MoE layer); drop it")
    if cf > args.experts > 0:
        raise ProgramError(
            f"capacity_factor {cf:g} is over experts ({args.experts}): an expert's capacity "
            f"would exceed every token of the batch (use -1, dropless, for no cap)"
        )
    if not args.sparse_matmul and cf == DROPLESS:
        raise ProgramError(
            "sparse_matmul: false (dense dispatch) needs capacity_factor > 0 "
            "(dropless dense dispatch is not modelled)"
        )
    holders = min(args.experts, expert_chips)
    if not 0 <= args.routing_skew <= max(holders - 1, 0):
        raise ProgramError(
            f"routing_skew must be between 0 and min(experts, expert chips) - 1 = "
            f"{max(holders - 1, 0)} (the busiest of the {holders} chips of a group that "
            f"hold experts takes at most every routed row of the group, {max(holders, 1)} "
            f"times the mean), got {args.routing_skew:g}"
        )
