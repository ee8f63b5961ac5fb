"""Faults: closed forms on a 16-ring, conservation and capacity under random fault
schedules (Hypothesis), reproducibility, chip failure policies and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tpusim.config.faults import FaultSet, FaultSpec, load_faults
from tpusim.engine import CollectiveOptions, run_collective
from tpusim.errors import ConfigError, InputError, SimulationError
from tpusim.network import NetworkSettings
from tpusim.topology.torus import Torus

W = 100e9  # bytes/s per link direction
V = 64 * 2**20


def ring16(wrap: bool = True, latency_s: float = 1e-6) -> Torus:
    return Torus([16], [wrap], link_bandwidth_Bps=W, hop_latency_s=latency_s)


def down(a: int, b: int, at: float = 0.0) -> FaultSpec:
    return FaultSpec(kind="link_down", link=(a, b), at=at)


def plan(*faults: FaultSpec, **kw) -> FaultSet:
    return FaultSet(faults=list(faults), **kw)


@pytest.mark.parametrize("algorithm", [None, "ring"])
def test_ring_with_a_dead_link_runs_as_the_line(algorithm):
    line, _ = run_collective(ring16(False), "all-gather", V, CollectiveOptions(algorithm=algorithm))
    broken, net = run_collective(
        ring16(), "all-gather", V, CollectiveOptions(algorithm=algorithm, faults=plan(down(3, 4)))
    )
    assert broken.time_s == pytest.approx(line.time_s, rel=0.02)
    assert broken.algorithm == line.algorithm
    assert net.fault_report["failed_links"] == [[3, 4]]
    assert "runs as a line" in net.fault_report["adapted"][0]
    assert net.fault_report["rerouted_flows"] == 0


def test_half_bandwidth_link_doubles_a_unidirectional_ring():
    topo = ring16(latency_s=0.0)
    healthy, _ = run_collective(topo, "all-gather", V, CollectiveOptions(algorithm="ring"))
    half = plan(FaultSpec(kind="link_degraded", link=(5, 6), bandwidth_fraction=0.5))
    slow, _ = run_collective(
        ring16(latency_s=0.0), "all-gather", V, CollectiveOptions(algorithm="ring", faults=half)
    )
    closed_form = 15 * (V / 16) / W  # (n-1) V/(nW)
    assert healthy.time_s == pytest.approx(closed_form, rel=1e-9)
    assert slow.time_s == pytest.approx(2 * closed_form, rel=1e-9)


def test_link_lost_mid_collective_lands_between_healthy_and_line():
    """Flows in flight reroute the long way round (15 hops), so the bound holds where
    bandwidth dominates (1 GiB: 4 ms of transfer per step against 15 us of latency)."""
    size = 2**30
    healthy, _ = run_collective(ring16(), "all-gather", size)
    line, _ = run_collective(ring16(False), "all-gather", size)
    for fraction in (0.1, 0.5, 0.9):
        mid, net = run_collective(
            ring16(),
            "all-gather",
            size,
            CollectiveOptions(faults=plan(down(7, 8, at=fraction * healthy.time_s))),
        )
        assert healthy.time_s < mid.time_s < line.time_s
        assert net.fault_report["rerouted_flows"] > 0


def _node_balance(topo: Torus, link_bytes: np.ndarray) -> np.ndarray:
    out = np.bincount(topo.links.src, weights=link_bytes, minlength=topo.num_chips)
    into = np.bincount(topo.links.dst, weights=link_bytes, minlength=topo.num_chips)
    return out - into


@settings(max_examples=25, deadline=None)
@given(
    links=st.lists(
        # when: a fraction of the healthy time, in hundredths (two distinct fractions
        # stay distinct instants once scaled; 0 and 5e-324 would not)
        st.tuples(
            st.integers(0, 15),
            st.sampled_from([0.0, 0.25, 0.5, 1.0]),
            st.integers(0, 100).map(lambda k: k / 100),
        ),
        min_size=1,
        max_size=3,
        unique_by=lambda fault: (fault[0], fault[2]),  # a link once per instant
    ),
    op=st.sampled_from(["all-gather", "all-reduce", "all-to-all"]),
)
def test_bytes_conserved_and_no_link_over_its_capacity(links, op):
    """Any schedule of faults on a 4x4 torus: every chip sends and receives what the
    collective says (flow conservation at every chip, so no byte is lost or made when
    flows reroute in flight), and no link ever carries more than its reduced bandwidth."""
    topo = Torus([4, 4], [True, True], link_bandwidth_Bps=W, hop_latency_s=1e-6)
    healthy, net0 = run_collective(topo, op, 2**20, CollectiveOptions(engine="none"))
    faults = []
    for chip, fraction, when in links:
        nxt = (chip // 4) * 4 + (chip + 1) % 4  # its x neighbour
        at = when * healthy.time_s
        if fraction == 0.0:
            faults.append(FaultSpec(kind="link_down", link=(chip, nxt), at=at))
        else:
            faults.append(
                FaultSpec(
                    kind="link_degraded", link=(chip, nxt), at=at, bandwidth_fraction=fraction
                )
            )
    _, net = run_collective(
        topo,
        op,
        2**20,
        CollectiveOptions(
            engine="none",
            faults=FaultSet(faults=faults),
            network=NetworkSettings.of(check_capacity=True),
        ),
    )
    assert net.max_link_load <= 1 + 1e-6
    # same sources and sinks as the healthy run: bytes out - bytes in per chip
    np.testing.assert_allclose(
        _node_balance(topo, net.link_bytes), _node_balance(topo, net0.link_bytes), atol=1e-3
    )
    if net.dead is not None:
        assert np.all(net.link_fraction[net.dead] == 0)


def test_same_seed_same_answer_and_seeds_differ():
    from tpusim.engine import simulate_collective

    runs = [
        simulate_collective(
            "v5e-pod",
            "all-reduce",
            2**24,
            CollectiveOptions(faults=FaultSet(fail_links=4, seed=s)),
        )
        for s in (1, 1, 2)
    ]
    (a, na), (b, nb), (_, nc) = runs
    assert a.time_s == b.time_s
    assert na.fault_report["failed_links"] == nb.fault_report["failed_links"]
    assert na.fault_report["failed_links"] != nc.fault_report["failed_links"]
    assert len(na.fault_report["failed_links"]) == 4


def test_chip_down_fails_the_collective_naming_chip_op_and_time():
    topo = Torus([4, 4], [True, True], link_bandwidth_Bps=W, hop_latency_s=1e-6)
    with pytest.raises(SimulationError, match=r"chip 5 \(x=1, y=1\) is down at 0 .*'all-reduce'"):
        run_collective(
            topo,
            "all-reduce",
            V,
            CollectiveOptions(faults=plan(FaultSpec(kind="chip_down", chip=5))),
        )
    healthy, _ = run_collective(topo, "all-reduce", V)
    at = healthy.time_s / 2
    fault = FaultSpec(kind="chip_down", chip=6, at=at)
    with pytest.raises(SimulationError, match=r"chip 6 \(x=2, y=1\) is down at"):
        run_collective(topo, "all-reduce", V, CollectiveOptions(faults=plan(fault)))


def test_exclude_shrinks_the_group():
    topo = Torus([16], [True], link_bandwidth_Bps=W, hop_latency_s=0.0)
    fault = FaultSpec(kind="chip_down", chip=3)
    res, net = run_collective(
        topo,
        "all-gather",
        V,
        CollectiveOptions(algorithm="ring", faults=plan(fault, on_chip_failure="exclude")),
    )
    assert res.group_size == 15
    assert "group shrinks to 15" in " ".join(net.fault_report["adapted"])
    # the 15 left run as a line (folded ring): 14 steps of V/15, each link direction once
    assert res.time_s == pytest.approx(14 * (V / 15) / W, rel=1e-9)
    assert net.fault_report["rerouted_flows"] == 0


def test_exclude_retries_a_collective_that_lost_a_chip():
    topo = ring16()
    healthy, _ = run_collective(topo, "all-gather", V)
    fault = FaultSpec(kind="chip_down", chip=3, at=healthy.time_s / 2)
    res, net = run_collective(
        topo, "all-gather", V, CollectiveOptions(faults=plan(fault, on_chip_failure="exclude"))
    )
    assert res.time_s > healthy.time_s * 1.5
    assert any("retried" in n for n in net.fault_report["adapted"])


def test_spare_cube_waits_for_the_ocs_and_keeps_the_whole_torus():
    from tpusim.engine.faults import OCS_RECONFIGURATION_S

    topo = Torus([4, 4, 4], [True] * 3, link_bandwidth_Bps=W, hop_latency_s=1e-6)
    healthy, _ = run_collective(topo, "all-reduce", 2**20)
    fault = FaultSpec(kind="chip_down", chip=9)
    res, _ = run_collective(
        topo,
        "all-reduce",
        2**20,
        CollectiveOptions(faults=plan(fault, on_chip_failure="spare_cube")),
    )
    assert res.group_size == 64
    assert res.time_s == pytest.approx(OCS_RECONFIGURATION_S + healthy.time_s, rel=1e-9)
    with pytest.raises(InputError, match="4x4x4 cubes"):
        run_collective(
            ring16(), "all-gather", V, CollectiveOptions(faults=plan(on_chip_failure="spare_cube"))
        )


def test_slow_chip_slows_the_reductions():
    from tpusim.engine import simulate_collective

    fast, _ = simulate_collective("v5e-pod", "all-reduce", 2**26)
    slow, _ = simulate_collective(
        "v5e-pod",
        "all-reduce",
        2**26,
        CollectiveOptions(faults=plan(FaultSpec(kind="slow_chip", chip=7, slowdown=3.0))),
    )
    assert slow.time_s > fast.time_s


def test_packet_fidelity_rejects_a_link_failing_mid_run_in_one_line():
    with pytest.raises(InputError, match="packet fidelity does not move packets in flight"):
        run_collective(
            ring16(),
            "all-gather",
            V,
            CollectiveOptions(
                faults=plan(down(0, 1, at=1e-6)), network=NetworkSettings.of("packet")
            ),
        )


def test_packet_fidelity_runs_a_ring_broken_from_the_start_as_the_line():
    """The dead link from the start: the ring runs as the line at packet fidelity too,
    within the packet-size error of the line's flow-fidelity time (15 steps of 2 hops
    of V/16 at 64 KiB packets: under 1%)."""
    res, _ = run_collective(
        ring16(),
        "all-gather",
        V,
        CollectiveOptions(faults=plan(down(0, 1)), network=NetworkSettings.of("packet")),
    )
    line, _ = run_collective(
        ring16(False), "all-gather", V, CollectiveOptions(network=NetworkSettings.of("flow"))
    )
    assert res.time_s == pytest.approx(line.time_s, rel=0.01)


def test_analytic_fidelity_routes_around_a_static_fault():
    res, _ = run_collective(
        ring16(),
        "all-gather",
        V,
        CollectiveOptions(faults=plan(down(0, 1)), network=NetworkSettings.of("analytic")),
    )
    line, _ = run_collective(
        ring16(False), "all-gather", V, CollectiveOptions(network=NetworkSettings.of("analytic"))
    )
    assert res.time_s == pytest.approx(line.time_s, rel=0.02)


@pytest.mark.parametrize(
    "fault, message",
    [
        (down(0, 5), r"faults\[0\] \(link_down\): link \[0, 5\] does not exist"),
        (down(0, 99), r"faults\[0\] \(link_down\): link \[0, 99\]: chips are 0..15"),
        (
            FaultSpec(kind="chip_down", chip=16),
            r"faults\[0\] \(chip_down\): chip 16 does not exist",
        ),
    ],
)
def test_faults_naming_missing_links_or_chips_are_input_errors(fault, message):
    with pytest.raises(InputError, match=message):
        run_collective(ring16(), "all-gather", V, CollectiveOptions(faults=plan(fault)))


@pytest.mark.parametrize(
    "entry, message",
    [
        ("{kind: link_down, link: [0, 1], at: -1 ms}", r"faults\[0\]\.at"),
        ("{kind: link_degraded, link: [0, 1], bandwidth_fraction: 1.5}", "bandwidth_fraction"),
        ("{kind: link_degraded, link: [0, 1], bandwidth_fraction: 0}", "bandwidth_fraction"),
        ("{kind: chip_down}", "chip_down needs 'chip'"),
        ("{kind: link_gone, link: [0, 1]}", r"faults\[0\]\.kind"),
    ],
)
def test_bad_fault_files_name_the_entry(tmp_path, entry, message):
    path = tmp_path / "f.yaml"
    path.write_text(f"faults:\n  - {entry}\n")
    with pytest.raises(ConfigError, match=message):
        load_faults(path)


def test_fault_file_round_trip(tmp_path):
    path = tmp_path / "f.yaml"
    path.write_text(
        "faults:\n  - {kind: link_down, link: [0, 1]}\n"
        "  - {kind: chip_down, chip: 3, at: 2 ms}\nfail_links: 2\nseed: 5\n"
    )
    loaded = load_faults(path)
    assert loaded.faults[1].at == pytest.approx(2e-3)
    assert loaded.fail_links == 2 and loaded.seed == 5
