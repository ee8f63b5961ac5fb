"""Serving on the engine's clock and network (tpusim/serving/shared.py): a
disaggregated service and a training job joined on one host share one SimPy clock and
contend on one network.

Setup, by hand: ironwood-256, llama-3.1-8b on one chip per replica, one prefill
replica (chip 0) and one decode replica (chip 1), neighbours over one ICI link of
100 GB/s at the chip's link efficiency 0.902 (configs/chips/ironwood.yaml). The
request's KV (prompt 512 tokens) is one flow of ``B`` bytes on link 0->1. The training
job sends 1 GB over the same link from time 0, and is still sending when the prefill
ends, so under max-min fairness each flow gets half the link while both run:

* the transfer serialises at ``R / 2`` instead of ``R = 100 GB/s x 0.902``: it takes
  ``B / R`` longer than alone (the latency and on-chip terms are the same);
* the job sends ``B`` bytes fewer in that ``2 B / R`` window, so it ends ``B / R`` later;
* the request's first token (the prefill, no network) is where it is alone, and its
  last token ``B / R`` later.
"""

from __future__ import annotations

import pytest

from tpusim.engine import RunSettings, Simulation
from tpusim.program.ir import Op, Program
from tpusim.serving.disaggregated import DisaggregatedService
from tpusim.serving.scheduler import Request
from tpusim.serving.service import Deployment, Service
from tpusim.serving.shared import run_shared

LINK_BPS = 100e9 * 0.902  # ironwood ICI link bandwidth x link efficiency
JOB_BYTES = 3 * 10**9  # 33 ms: outlasts the first token at any shipped host time


@pytest.fixture(scope="module")
def split() -> DisaggregatedService:
    service = Service(Deployment("ironwood-256", "llama-3.1-8b", tp=1, replicas=2))
    return DisaggregatedService(service, 1, 1)


def _job(split: DisaggregatedService) -> Simulation:
    """A training job whose gradient exchange sends ``JOB_BYTES`` from chip 0 to 1."""
    send = Op(
        name="grad_sync",
        kind="collective",
        collective="collective-permute",
        size_bytes=JOB_BYTES,
        pairs=((0, 1),),
        split_ports=True,
        algorithm="direct",
    )
    costs = split.costs
    return Simulation(
        costs.system,
        Program(name="train", ops=(send,)),
        RunSettings(port_rows=False),
        topology=costs.topology,
        routes=costs.routes,
    )


def _job_end_s(results) -> float:
    return max(r.end_at for r in results.ops)


def test_the_kv_transfer_is_one_flow_on_the_link_between_the_replicas(split):
    op = split.transfer_op(0, 0, 512)
    assert op.pairs == ((0, 1),)
    alone = split.transfer_s(0, 0, 512)
    # alone: serialisation at the full link plus a few microseconds of launch and latency
    assert 0 < alone - op.size_bytes / LINK_BPS < 20e-6


def test_a_service_and_a_training_job_share_one_clock_and_one_network(split):
    extra_s = split.transfer_op(0, 0, 512).size_bytes / LINK_BPS

    alone = [Request(0, 0.0, 512, 4)]
    split.run(alone)
    (transfer_alone,) = split.transfers_s
    job_alone = _job_end_s(_job(split).run())

    shared = [Request(0, 0.0, 512, 4)]
    results, (run,) = run_shared(_job(split), [(split, shared)])
    (transfer_shared,) = split.transfers_s

    assert job_alone > shared[0].first_token_at + transfer_shared  # overlap throughout
    assert transfer_shared - transfer_alone == pytest.approx(extra_s, rel=1e-9)
    assert _job_end_s(results) - job_alone == pytest.approx(extra_s, rel=1e-9)
    assert shared[0].first_token_at == alone[0].first_token_at
    assert shared[0].finished_at - alone[0].finished_at == pytest.approx(extra_s, rel=1e-9)
    assert run.requests is shared and sum(r.iterations for r in run.replicas) == 4


def test_two_services_on_one_host_each_serve_their_own_requests(split):
    """Two colocated services joined on one host: each request ends as it does alone
    (colocated replicas send nothing on the network)."""
    service = Service(Deployment("ironwood-256", "llama-3.1-8b", tp=1))
    alone = [Request(i, 0.01 * i, 300 + 50 * i, 6) for i in range(4)]
    service.run(alone)
    host = _job(split)
    first = [Request(i, 0.01 * i, 300 + 50 * i, 6) for i in range(4)]
    second = [Request(i, 0.01 * i, 300 + 50 * i, 6) for i in range(4)]
    _, runs = run_shared(host, [(service, first), (service, second)])
    for mine in (first, second):
        assert [r.finished_at for r in mine] == [r.finished_at for r in alone]
    assert [len(run.requests) for run in runs] == [4, 4]


def test_kv_transfers_in_flight_at_once_share_the_link(split):
    """Two requests prefilled in one iteration send their KV over link 0->1 at once:
    each at half the link, so each takes ``B / R`` longer than one alone."""
    extra_s = split.transfer_op(0, 0, 512).size_bytes / LINK_BPS
    split.run([Request(0, 0.0, 512, 4)])
    (alone,) = split.transfers_s
    pair = [Request(0, 0.0, 512, 4), Request(1, 0.0, 512, 4)]
    split.run(pair)
    assert pair[0].first_token_at == pair[1].first_token_at  # one prefill iteration
    assert split.transfers_s == pytest.approx([alone + extra_s] * 2, rel=1e-9)


def test_a_service_placed_after_the_job_does_not_contend_with_it(split):
    """The same service from chip 2 on (prefill chip 2, decode chip 3): its KV crosses
    link 2->3, which the job's flow on 0->1 does not use, so the transfer takes what
    it takes alone."""
    moved = DisaggregatedService(split.service, 1, 1, first_chip=2)
    assert moved.transfer_op(0, 0, 512).pairs == ((2, 3),)
    moved.run([Request(0, 0.0, 512, 4)])
    (alone,) = moved.transfers_s
    run_shared(_job(split), [(moved, [Request(0, 0.0, 512, 4)])])
    assert moved.transfers_s == [alone]
    with pytest.raises(ValueError, match="2 chips from chip 255 do not fit the system's 256"):
        DisaggregatedService(split.service, 1, 1, first_chip=255)
