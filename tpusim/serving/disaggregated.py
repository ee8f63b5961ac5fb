"""Prefill/decode disaggregation: ``prefill`` replicas compute prompts (and sample the
first token), the KV cache moves over the network to a ``decode`` replica, which
generates the rest (as DistServe and vLLM's disaggregated prefill run it).

Placement: prefill replicas first on the system's chips, decode replicas after them,
``tp * ep`` chips each. The KV transfer of a request from prefill replica ``p`` to
decode replica ``q`` is a collective-permute (each chip sends its shard to the chip
of the same rank, ``prompt * layers * kv_bytes_per_token_layer`` bytes) simulated by
the engine on the real topology, alone (it does not contend with the replicas' own
collectives), cached per (``p``, ``q``, bucket of the prompt).

The stages are run one after the other, which is exact here: prefill replicas never
wait for decode ones (the prefill frees a request's cache once its KV has left), so
their timeline does not depend on the decode side. Requests go round-robin to the
prefill replicas and, in arrival order, to the decode replicas.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpusim.program.ir import Op, Program
from tpusim.serving.costs import bucket
from tpusim.serving.scheduler import Request
from tpusim.serving.service import Service, ServingRun


class DisaggregatedService:
    """``prefill`` + ``decode`` replicas of ``service``'s shape (its deployment's
    ``replicas`` must be their sum). Raises ValueError for fewer than one of each."""

    def __init__(self, service: Service, prefill: int, decode: int):
        if prefill < 1 or decode < 1:
            raise ValueError("disaggregation needs at least one prefill and one decode replica")
        if prefill + decode != service.deployment.replicas:
            raise ValueError("prefill + decode replicas must be the deployment's replicas")
        self.service, self.prefill, self.decode = service, prefill, decode
        self.deployment, self.costs, self.chips = service.deployment, service.costs, service.chips
        self._transfer: dict[tuple[int, int, int], float] = {}
        self.transfers_s: list[float] = []

    def describe(self) -> dict[str, Any]:
        """The deployment's fixed figures with the replica split."""
        return self.service.describe() | {
            "prefill_replicas": self.prefill,
            "decode_replicas": self.decode,
        }

    def transfer_s(self, source: int, target: int, prompt_tokens: int) -> float:
        """Seconds to move ``prompt_tokens`` tokens of KV from prefill replica
        ``source`` to decode replica ``target`` (the prompt bucketed up)."""
        key = (source, target, bucket(prompt_tokens))
        if key not in self._transfer:
            s = self.service.shape
            size = key[2] * s.layers * s.kv_bytes_per_token_layer()
            first, second = source * s.chips, (self.prefill + target) * s.chips
            pairs = tuple((first + i, second + i) for i in range(s.chips))
            op = Op(
                name="kv_transfer",
                kind="collective",
                collective="collective-permute",
                size_bytes=size,
                pairs=pairs,
                split_ports=True,
                algorithm="direct",
            )
            times = self.service.costs.simulate(Program(name="kv_transfer", ops=(op,)))
            self._transfer[key] = times["kv_transfer"]
        return self._transfer[key]

    def run(self, requests: list[Request]) -> ServingRun:
        """Serve ``requests`` (sorted by arrival); each ends completed or rejected, with
        its first token from the prefill stage and the rest from the decode stage."""
        firsts = [Request(i, r.arrival_at, r.prompt_tokens, 1) for i, r in enumerate(requests)]
        run = ServingRun(requests)
        for p in range(self.prefill):
            run.replicas.append(self.service.run_replica(firsts[p :: self.prefill]))
        seconds = self._second_stage(requests, firsts)
        for q in range(self.decode):
            mine = sorted(seconds[q :: self.decode], key=lambda r: r.arrival_at)
            run.replicas.append(self.service.run_replica(mine))
        by_position = {r.id: r for r in seconds}
        for i, (req, first) in enumerate(zip(requests, firsts, strict=True)):
            _merge(req, first, by_position.get(i))
        return run

    def _second_stage(self, requests: list[Request], firsts: list[Request]) -> list[Request]:
        """The decode stage's requests (``id``: the position in ``requests``), arriving
        when their KV has moved, with the prompt in the cache and one token generated;
        :attr:`transfers_s` gets each transfer's time."""
        done = [f for f in firsts if f.finished_at is not None]
        done.sort(key=lambda f: (f.finished_at, f.id))
        out: list[Request] = []
        self.transfers_s = []
        for first in done:
            original = requests[first.id]
            if original.output_tokens == 1:
                continue
            target = len(out) % self.decode
            transfer = self.transfer_s(first.id % self.prefill, target, first.prompt_tokens)
            self.transfers_s.append(transfer)
            ready = float(first.finished_at or 0.0) + transfer
            prompt, output = original.prompt_tokens, original.output_tokens
            second = Request(first.id, ready, prompt, output, computed=prompt, generated=1)
            out.append(second)
        return out


def _merge(req: Request, first: Request, second: Request | None) -> None:
    """The user's view of a request from its two stages."""
    req.rejected = first.rejected or (second is not None and second.rejected)
    req.first_token_at = first.first_token_at
    req.queued_s = first.queued_s + (second.queued_s if second else 0.0)
    req.preemptions = first.preemptions + (second.preemptions if second else 0)
    req.generated = first.generated + (second.generated - 1 if second else 0)
    if req.rejected:
        req.finished_at = None
    elif req.output_tokens == 1:
        req.finished_at = first.finished_at
    elif second is not None:
        req.finished_at = second.finished_at


def transfer_summary(service: DisaggregatedService) -> dict[str, Any]:
    """The replica split and the KV transfer times (s) of the last run, p50 and p99."""
    values = np.array(service.transfers_s, dtype=float)
    return {
        "prefill_replicas": service.prefill,
        "decode_replicas": service.decode,
        "kv_transfer_p50_s": float(np.percentile(values, 50)) if values.size else None,
        "kv_transfer_p99_s": float(np.percentile(values, 99)) if values.size else None,
    }
