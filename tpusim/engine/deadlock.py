"""A simulation that cannot finish, reported as a deadlock naming the chips and ops.

Once the SimPy environment has run dry, a collective some chip class never reached, or
an op that never ran, is a :class:`~tpusim.errors.SimulationError` (exit code 1) that
says which collective waits on which chips, or which op is stuck on which chips.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import simpy

from tpusim.engine.schedule import Rendezvous
from tpusim.errors import SimulationError

__all__ = ["chips_text", "raise_if_deadlocked"]


def raise_if_deadlocked(
    rendezvous: Mapping[str, Rendezvous],
    pending: Mapping[str, Mapping[str, simpy.Event]],
    classes: Mapping[str, Sequence[int]],
) -> None:
    """Raise SimulationError for the first collective (by ``rendezvous``) some class
    never reached, else for the ops of ``pending`` (class -> op -> done event) that
    never ran; ``classes`` names each class's chips."""
    for name, meeting in rendezvous.items():
        if meeting.missing:
            waiting = ", ".join(sorted(meeting.arrived))
            absent = ", ".join(chips_text(classes[c]) for c in sorted(meeting.missing))
            raise SimulationError(
                f"deadlock: collective '{name}' waits on {waiting}, but {absent} never reach it"
            )
    stuck = [(c, op) for c, done in pending.items() for op, ev in done.items() if not ev.triggered]
    if stuck:
        cls, op = stuck[0]
        raise SimulationError(
            f"deadlock: op '{op}' on {chips_text(classes[cls])} never ran ({len(stuck)} ops stuck)"
        )


def chips_text(chips: Sequence[int]) -> str:
    """``chip 7`` or ``chips 0..255 (256 chips)``."""
    if len(chips) == 1:
        return f"chip {chips[0]}"
    return f"chips {chips[0]}..{chips[-1]} ({len(chips)} chips)"
