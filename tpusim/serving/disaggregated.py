"""Prefill/decode disaggregation: ``prefill`` replicas compute prompts (and sample the
first token), the KV cache moves over the network to a ``decode`` replica, which
generates the rest (as DistServe and vLLM's disaggregated prefill run it).

Placement: prefill replicas first on the system's chips, decode replicas after them,
``tp * ep`` chips each. Every replica is a SimPy process (:mod:`.replica`) on one
environment; when a prefill replica's iteration completes a request, the request's KV
moves from prefill replica ``p`` to decode replica ``q`` as a collective-permute (each
chip sends its shard to the chip of the same rank, ``prompt * layers *
kv_bytes_per_token_layer`` bytes, the prompt bucketed up) whose flows run on the
host's network (:mod:`.shared`): transfers in flight at once share its links (max-min
fair shares under the flow fidelity) with each other and with any training job on
the same host. The request arrives at ``q`` when its last byte has.

Requests go round-robin to the prefill replicas and, in the order their prefill
completes, to the decode replicas.
"""

from __future__ import annotations

from collections.abc import Generator

import numpy as np
import simpy

from tpusim.engine import Simulation
from tpusim.program.ir import Op, Program
from tpusim.serving.costs import bucket
from tpusim.serving.replica import Collect, Replica, ServingRun
from tpusim.serving.rows import Row
from tpusim.serving.scheduler import Request
from tpusim.serving.service import Service
from tpusim.serving.shared import Transfers, host_for


class DisaggregatedService:
    """``prefill`` + ``decode`` replicas of ``service``'s shape (its deployment's
    ``replicas`` must be their sum), on the system's chips from ``first_chip`` on (a
    job sharing the host may hold the ones before). Raises ValueError for fewer than
    one of each, or for replicas past the system's last chip."""

    def __init__(self, service: Service, prefill: int, decode: int, first_chip: int = 0):
        if prefill < 1 or decode < 1:
            raise ValueError("disaggregation needs at least one prefill and one decode replica")
        if prefill + decode != service.deployment.replicas:
            raise ValueError("prefill + decode replicas must be the deployment's replicas")
        if not 0 <= first_chip <= service.system.num_chips - service.chips:
            raise ValueError(
                f"{service.chips} chips from chip {first_chip} do not fit the system's "
                f"{service.system.num_chips}"
            )
        self.service, self.prefill, self.decode = service, prefill, decode
        self.first_chip = first_chip
        self.deployment, self.costs, self.chips = service.deployment, service.costs, service.chips
        self.transfers_s: list[float] = []

    def describe(self) -> Row:
        """The deployment's fixed figures with the replica split."""
        return self.service.describe() | {
            "prefill_replicas": self.prefill,
            "decode_replicas": self.decode,
        }

    def transfer_op(self, source: int, target: int, prompt_tokens: int) -> Op:
        """The collective-permute moving ``prompt_tokens`` tokens of KV (the prompt
        bucketed up) from prefill replica ``source`` to decode replica ``target``."""
        s = self.service.shape
        size = bucket(prompt_tokens) * s.layers * s.kv_bytes_per_token_layer()
        first = self.first_chip + source * s.chips
        second = self.first_chip + (self.prefill + target) * s.chips
        return Op(
            name="kv_transfer",
            kind="collective",
            collective="collective-permute",
            size_bytes=size,
            pairs=tuple((first + i, second + i) for i in range(s.chips)),
            split_ports=True,
            algorithm="direct",
        )

    def transfer_s(self, source: int, target: int, prompt_tokens: int) -> float:
        """Seconds :meth:`transfer_op` takes alone on an idle network (an engine run of
        its own)."""
        op = self.transfer_op(source, target, prompt_tokens)
        return self.service.costs.simulate(Program(name="kv_transfer", ops=(op,)))[op.name]

    def run(self, requests: list[Request]) -> ServingRun:
        """Serve ``requests`` (sorted by arrival) alone, on a host of its own; see
        :meth:`start`."""
        host = host_for(self.costs)
        collect = self.start(requests, host)
        host.env.run()
        return collect()

    def start(self, requests: list[Request], host: Simulation) -> Collect:
        """Start the prefill and decode replicas on ``host``'s environment, the KV
        transfers on its network; once the environment has run, each request of the
        collected run has ended completed or rejected, with its first token from the
        prefill stage and the rest from the decode stage, and :attr:`transfers_s`
        holds each transfer's time."""
        env, transfers = host.env, Transfers(host)
        firsts = [Request(i, r.arrival_at, r.prompt_tokens, 1) for i, r in enumerate(requests)]
        decoders = [self.service.replica(env, []) for _ in range(self.decode)]
        seconds: list[Request] = []
        self.transfers_s = []

        def completed(done: list[Request]) -> None:
            for first in sorted(done, key=lambda f: f.id):
                original = requests[first.id]
                if original.output_tokens == 1:
                    continue
                prompt, output = original.prompt_tokens, original.output_tokens
                second = Request(first.id, 0.0, prompt, output, computed=prompt, generated=1)
                target = len(seconds) % self.decode
                seconds.append(second)
                op = self.transfer_op(first.id % self.prefill, target, prompt)
                env.process(self._move(transfers, op, second, decoders[target]))

        n = self.prefill
        prefills = [self.service.replica(env, firsts[p::n], None, completed) for p in range(n)]

        def collect() -> ServingRun:
            by_position = {r.id: r for r in seconds}
            for i, (req, first) in enumerate(zip(requests, firsts, strict=True)):
                _merge(req, first, by_position.get(i))
            return ServingRun(requests, [r.stats for r in (*prefills, *decoders)])

        return collect

    def _move(
        self, transfers: Transfers, op: Op, second: Request, decoder: Replica
    ) -> Generator[simpy.Event, object, None]:
        """Move ``second``'s KV (``op``) on the network, then hand it to ``decoder``."""
        began = transfers.sim.env.now
        yield transfers.start(op)
        self.transfers_s.append(float(transfers.sim.env.now - began))
        decoder.deliver(second)


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


def transfer_summary(service: DisaggregatedService) -> Row:
    """The replica split and the KV transfer times (s) of the last run, p50 and p99."""
    values = np.array(service.transfers_s, dtype=float)
    return {
        "prefill_replicas": service.prefill,
        "decode_replicas": service.decode,
        "kv_transfer_p50_s": float(np.percentile(values, 50)) if values.size else None,
        "kv_transfer_p99_s": float(np.percentile(values, 99)) if values.size else None,
    }
