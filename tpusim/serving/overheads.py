"""What a real server pays per iteration beyond the chip's roofline and the network:
the host's scheduling and launch time, the fraction of peak HBM bandwidth the
iteration's memory-bound ops reach, and the sampler's passes over the logits.

Model: an iteration of ``S`` sequences per chip takes

    engine time with HBM bandwidth ``hbm_efficiency x peak`` (replacing the chip's
    ``efficiency.hbm``)
    + ``host_s``
    + ``sampling_passes`` x (``S x vocab / tp x 4`` bytes of fp32 logits at that bandwidth)
    (the routed experts' compute divided by ``expert_efficiency``)

``host_s`` is vLLM's CPU side of one step (scheduling, input preparation, the
launch of the compiled graph, detokenisation); it is paid once per iteration,
whatever the batch. ``hbm_efficiency`` applies to every HBM-bound op of the
iteration (weight and KV reads of decode above all; prefill is compute-bound and
barely moves). ``sampling_passes`` counts the sampler's passes over the logits
besides the one read the output program already charges (softmax, the top-k/top-p
sort). ``expert_efficiency`` divides the compute of a MoE layer's routed experts (a
grouped megablox matmul, already charged the chip's ``grouped_matmul`` term): the
fraction of that rate the serving engine's MoE kernels reach (dispatch, token
permutation and the kernels' tiling, which training's steps do not exercise).
``step_s`` is a fixed time per iteration on the chips (the step's launch, its
host-device synchronisation and input transfer): unlike ``host_s`` it is part of the
device time, so async scheduling does not hide it. ``moe_layer_s`` is a fixed time
per MoE layer per iteration on the chips (the router's top-k, the token permutation
and the expert all-to-alls' latency, whatever the batch): a dense model pays none.
``moe_token_s`` is a time per token of the step (padded to the engine's bucket) per
MoE layer on the chips: the routing work every device of an expert-parallel replica
does for the whole batch whatever its share of the experts (the sorts by expert, the
expert counts, the permutes), which more chips do not divide.

The terms are data: each server profile (:mod:`tpusim.serving.servers`,
``configs/servers/*.yaml``) gives them per chip generation with their sources and
grades, and ``tpusim calibrate --serving`` writes fitted ones there.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tpusim.config.calibration import with_efficiency

if TYPE_CHECKING:
    from tpusim.config.loader import System

#: Bytes per logit the sampler reads (fp32 logits: vLLM samples in float32).
SAMPLER_LOGIT_BYTES = 4


@dataclass(frozen=True)
class IterationOverheads:
    """Per-iteration terms (see the module docstring): ``host_s`` seconds,
    ``hbm_efficiency`` a fraction in (0, 1], ``sampling_passes`` extra passes,
    ``expert_efficiency`` a fraction in (0, 1], ``step_s``, ``moe_layer_s`` and
    ``moe_token_s`` seconds."""

    host_s: float = 0.0
    hbm_efficiency: float = 1.0
    sampling_passes: float = 0.0
    expert_efficiency: float = 1.0
    step_s: float = 0.0
    moe_layer_s: float = 0.0
    moe_token_s: float = 0.0

    def __post_init__(self) -> None:
        if not self.step_s >= 0 or not self.moe_layer_s >= 0 or not self.moe_token_s >= 0:
            raise ValueError("step_s, moe_layer_s and moe_token_s must be >= 0")
        if not self.host_s >= 0 or not 0 < self.hbm_efficiency <= 1:
            raise ValueError("host_s must be >= 0 and hbm_efficiency in (0, 1]")
        if not 0 < self.expert_efficiency <= 1:
            raise ValueError("expert_efficiency must be in (0, 1]")
        if not self.sampling_passes >= 0:
            raise ValueError("sampling_passes must be >= 0")


#: No overheads: the iteration is what the engine and the roofline give.
NONE = IterationOverheads()


def with_hbm_efficiency(system: System, efficiency: float) -> System:
    """``system`` (a loaded :class:`~tpusim.config.loader.System`) whose chip's streaming
    ops reach ``efficiency`` of its HBM bandwidth: the serving term replaces the chip
    file's ``efficiency.hbm`` (which the training calibration fits on whole steps)
    rather than multiplying it, so decode's HBM efficiency is the one fitted on the
    serving figures."""

    if system.chip.hbm.bandwidth_Bps is None:
        return system
    slowed = with_efficiency(system.chip, hbm=efficiency)
    pod = None if system.pod is None else with_hbm_efficiency(system.pod, efficiency)
    return dataclasses.replace(system, chip=slowed, pod=pod)
