"""Simulating a program on a system: compute and communication overlapping where the
dependencies allow.

``Simulation(system, program, RunSettings(network, seed, faults)).run() -> Results``.
The simulation owns its SimPy environment, network and RNG: two simulations never
interfere (or, made with ``Simulation.joining``, share them on purpose). The package:

- :mod:`.simulation`: the driver (chip classes, one process per op, deadlocks);
- :mod:`.placement`: mesh axes to physical axes, collectives to chip groups;
- :mod:`.handlers`: one handler per op kind, in a registry;
- :mod:`.schedule`: a collective's schedule on the network, and its rendezvous;
- :mod:`.deadlock`: a run that cannot finish, named by chips and ops;
- :mod:`.collective`: one collective as a one-op program (`run_collective`);
- :mod:`.settings`: what a run takes besides program and system (``RunSettings``,
  ``CollectiveOptions``).

Measurements go to observers (:mod:`tpusim.results.observers`); ``Results`` and
``OpRecord`` live in :mod:`tpusim.results.simulation`.
"""

from tpusim.engine.collective import link_table, run_collective, simulate_collective
from tpusim.engine.handlers import OP_HANDLERS, ChipClass, OpHandler, compute_handler, op_handler
from tpusim.engine.placement import Placement, map_mesh
from tpusim.engine.settings import CollectiveOptions, RunSettings
from tpusim.engine.simulation import Simulation
from tpusim.results.simulation import CollectiveResult, OpRecord, Results

__all__ = [
    "OP_HANDLERS",
    "ChipClass",
    "CollectiveOptions",
    "CollectiveResult",
    "OpHandler",
    "OpRecord",
    "Placement",
    "Results",
    "RunSettings",
    "Simulation",
    "compute_handler",
    "link_table",
    "map_mesh",
    "op_handler",
    "run_collective",
    "simulate_collective",
]
