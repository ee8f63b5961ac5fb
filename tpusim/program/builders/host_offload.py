"""Host offload and the optimiser step of a training step: ``host_transfer`` ops over
the chip's host link and the ZeRO-1 collectives around the optimiser.

* Every host transfer is asynchronous (``overlap=True``: XLA's host offload copies run
  on DMA engines while the TensorCore computes) and queues behind the previous one on
  the chip's host link (one transfer at a time at ``host_bandwidth_Bps``, one way; an
  assumption: a PCIe link carries both directions at once, so this is conservative
  when offloads and fetches coincide).
* Activations a remat policy offloads (:mod:`.remat`): after a layer's forward they
  are copied to host; before its backward they are fetched, starting when the pass
  ``fsdp_prefetch_layers`` back has ended (one
  layer ahead, as the FSDP gathers prefetch); the backward waits for them.
* ``param_memory_host_offload``: before each FSDP all-gather of a layer's weights (or,
  without FSDP, before its pass) the chip's shard of them is fetched from host; after
  the optimiser the updated shard is written back.
* ``optimizer_memory_host_offload``: the optimiser state is fetched before the
  optimiser (from the start of the step on) and written back after it.
* ZeRO-1 (``shard_optimizer_over_data``): each layer's gradient is reduce-scattered
  over the data axes instead of all-reduced (same bytes in), the optimiser updates
  ``1 / data`` of the parameters, and an all-gather of the updated weights over the
  data axes follows it (async; at the end of the step, exposed).
"""

from __future__ import annotations

from typing import Protocol

from tpusim.program.builders.oplist import OpList
from tpusim.program.builders.training import TrainingStep


class Emits(Protocol):
    """What these functions need of the step's emitter."""

    step: TrainingStep
    out: OpList
    last: str | None
    host: list[str]
    pass_ends: list[str]


def host_transfer(e: Emits, name: str, size_bytes: float, after: list[str | None]) -> str:
    """An async ``host_transfer`` of ``size_bytes`` after ``after`` and the chip's
    previous host transfer; returns its name."""
    op = e.out.add(
        name,
        "host_transfer",
        [e.host[-1] if e.host else None, *after],
        bytes=size_bytes,
        bandwidth_Bps=e.step.args.host_bandwidth_Bps,
        overlap=True,
    )
    e.host.append(op)
    return op


def offload_activations(e: Emits, prefix: str, layer: int) -> None:
    """Copy layer ``layer``'s offloaded activations to host after its forward."""
    size = e.step.offloaded_bytes(layer)
    if size:
        host_transfer(e, f"{prefix}.activations.to_host", size, [e.last])


def fetch_activations(e: Emits, prefix: str, layer: int) -> str | None:
    """Fetch layer ``layer``'s offloaded activations before its backward (prefetched
    one layer ahead); None when it offloads none."""
    size = e.step.offloaded_bytes(layer)
    if not size:
        return None
    return host_transfer(e, f"{prefix}.activations.from_host", size, [_prefetch_point(e)])


def fetch_weights(e: Emits, prefix: str, phase: str, layer: int) -> str | None:
    """Under ``param_memory_host_offload`` fetch the chip's shard of layer ``layer``'s
    weights before its ``phase`` pass; None otherwise."""
    step = e.step
    if not step.args.param_memory_host_offload:
        return None
    size = step.params(layer).total / step.shard * step.bytes_per_element
    return host_transfer(e, f"{prefix}.weights.from_host.{phase}", size, [_prefetch_point(e)])


def _prefetch_point(e: Emits) -> str | None:
    """The end of the pass ``fsdp_prefetch_layers`` back (None early on)."""
    ends, depth = e.pass_ends, e.step.args.prefetch_layers
    return ends[-depth] if len(ends) >= depth else None


def optimizer_step(e: Emits, grad_syncs: list[str]) -> None:
    """The optimiser (one elementwise op over the chip's share of the parameters:
    ``24 + 2 x dtype`` bytes each) with its host transfers and ZeRO-1 all-gather."""
    step = e.step
    params = step.local_params / step.zero_shard
    state = params * step.optimizer_state_bytes
    fetch = None
    if step.args.optimizer_memory_host_offload:
        fetch = host_transfer(e, "optimizer.state.from_host", state, [])
    size = params * (2 * step.optimizer_state_bytes + 2 * step.bytes_per_element)
    done = e.out.add("optimizer", "elementwise", [e.last, fetch, *grad_syncs], bytes=size)
    if step.args.optimizer_memory_host_offload:
        host_transfer(e, "optimizer.state.to_host", state, [done])
    if step.args.param_memory_host_offload:
        weights = params * step.bytes_per_element
        host_transfer(e, "optimizer.weights.to_host", weights, [done])
    if step.zero_group:
        gathered = step.local_params * step.bytes_per_element
        fields = dict(collective="all-gather", size_bytes=gathered, axes=step.zero_group)
        fields["role"] = step.issuer(("batch",), step.zero_group)
        e.out.add("optimizer.weights.allgather", "collective", [done], overlap=True, **fields)
