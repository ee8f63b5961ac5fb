"""Scheduler policies: the order in which a replica's scheduler admits waiting
requests (:mod:`tpusim.serving.scheduler`), a family that grows by registration.

A policy gives a ``priority`` of a waiting request (lower first); the scheduler
admits the waiting request of least priority, ties in queue order (a preempted
request goes back to the front of the queue, so it wins its ties). ``priority`` None
is first come, first served: the head of the queue, vLLM's default ``fcfs`` policy.
Everything else is the scheduler's: the running requests keep their budget first, a
request that does not fit stops admission for this iteration (head-of-line blocking,
as vLLM's V1 scheduler), preemption takes the most recently admitted.

A new policy is a :class:`SchedulerPolicy` and one ``SCHEDULERS.register`` call; the
``scheduler`` option of ``tpusim serve`` and ``kind: serving`` names it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Protocol

from pydantic import AfterValidator

from tpusim.registry import Registry

__all__ = ["DEFAULT_SCHEDULER", "SCHEDULERS", "SchedulerName", "SchedulerPolicy", "Waiting"]

#: vLLM's default policy.
DEFAULT_SCHEDULER = "fcfs"


class Waiting(Protocol):
    """What a policy sees of a waiting request
    (:class:`~tpusim.serving.scheduler.Request`): its id, arrival (s), token counts, the
    tokens already computed and generated, and whether it hits the prefix cache."""

    id: int
    arrival_at: float
    prompt_tokens: int
    output_tokens: int
    computed: int
    generated: int
    prefix_hit: bool


@dataclass(frozen=True)
class SchedulerPolicy:
    """A policy (see the module docstring): ``priority`` of a waiting request, lower
    admitted first (None: the queue's order), and a one-line ``description``."""

    description: str
    priority: Callable[[Waiting], float] | None = None


SCHEDULERS: Registry[SchedulerPolicy] = Registry("scheduler policy")
SCHEDULERS.register(DEFAULT_SCHEDULER, SchedulerPolicy("first come, first served (vLLM's default)"))


def _known(name: str) -> str:
    """``name`` when it is a registered policy; raises UnknownEntryError (a ValueError)
    naming the known ones."""
    SCHEDULERS.get(name)
    return name


#: A registered policy's name, checked when an options model is validated.
SchedulerName = Annotated[str, AfterValidator(_known)]
