"""Simulating a program on a system: compute and communication overlapping where the
dependencies allow.

``Simulation(system, program, fidelity, seed).run() -> Results``. The simulation owns
its SimPy environment, network and RNG: two simulations never interfere. The package:

- :mod:`.simulation`: the driver (chip classes, one process per op, deadlocks);
- :mod:`.placement`: mesh axes to physical axes, collectives to chip groups;
- :mod:`.handlers`: one handler per op kind, in a registry;
- :mod:`.schedule`: a collective's schedule on the network, and its rendezvous;
- :mod:`.collective`: one collective as a one-op program (`run_collective`).

Measurements go to observers (:mod:`tpusim.results.observers`); ``Results`` and
``OpRecord`` live in :mod:`tpusim.results.simulation`.
"""

from tpusim.engine.collective import link_table, run_collective, simulate_collective
from tpusim.engine.handlers import OP_HANDLERS, ChipClass, OpHandler, compute_handler, op_handler
from tpusim.engine.placement import Placement, map_mesh
from tpusim.engine.simulation import Simulation
from tpusim.results.simulation import CollectiveResult, OpRecord, Results

__all__ = [
    "OP_HANDLERS",
    "ChipClass",
    "CollectiveResult",
    "OpHandler",
    "OpRecord",
    "Placement",
    "Results",
    "Simulation",
    "compute_handler",
    "link_table",
    "map_mesh",
    "op_handler",
    "run_collective",
    "simulate_collective",
]
