"""One serving replica as a SimPy process on the engine's environment.

The process is a loop over iterations: at each iteration boundary it admits the
requests that have arrived (rejecting one that cannot fit the cache alone or the
model's context), asks the scheduler for the next plan (:mod:`.scheduler`), holds the
clock for the plan's time (:class:`~tpusim.serving.costs.IterationCosts`, a SimPy
timeout) and applies it. An idle replica waits for its next arrival: a timeout to a
given arrival time, or an event fired by :meth:`Replica.deliver` (the decode side of
a disaggregated service, whose requests arrive when their KV has crossed the network).

A request reaches the scheduler only at a scheduling decision made after it arrived
(vLLM V1's engine core: ``EngineCore.step`` calls ``Scheduler.schedule`` once per
iteration, at its start, and a request sent by a client that has just read the last
step's output arrives after that call). A busy replica therefore admits, at the start
of iteration ``k + 1``, only the requests that arrived strictly before that moment; with
``async_scheduling`` (vLLM's ``--async-scheduling``: ``EngineCore.step_with_batch_queue``
schedules iteration ``k + 1`` while iteration ``k`` runs, a queue of two) strictly before
the start of iteration ``k``. A closed-loop client's next request thus waits one
iteration more (two with async scheduling) than it would if it were seen at once. An
idle replica sees an arrival at once.

The replica keeps its own clock ``now`` (the sum of its iteration times, exactly as a
plain loop would add them) and holds the environment until it; the environment's
clock equals it up to rounding, so a replica alone reproduces the plain loop's numbers
to the bit, and several replicas, services and training jobs share one clock.

The loop also integrates, as it goes, the number of requests waiting and in the
system over time (request-seconds), an account independent of the per-request
timestamps: Little's law (``area = sum of per-request times``) checks one against the
other.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import simpy

from tpusim.errors import SimulationError
from tpusim.serving.costs import IterationCosts, ReplicaBatch
from tpusim.serving.scheduler import Request, Scheduler

if TYPE_CHECKING:
    from collections.abc import Generator

#: Told the requests an iteration completed, at the environment's time it ended.
Completed = Callable[[list[Request]], None]


@dataclass(frozen=True)
class IterationRecord:
    """One iteration of a replica: when it started (s), how long it took (s), its
    ``decode`` sequences and its prefill ``chunks`` of ``prefill_tokens`` in all."""

    start_at: float
    duration_s: float
    decode: int
    chunks: int
    prefill_tokens: int

    @property
    def sequences(self) -> int:
        """The batch size: decode sequences plus prefill chunks."""
        return self.decode + self.chunks

    @property
    def tokens(self) -> int:
        """Tokens the iteration computes: one per decode sequence plus the chunks'."""
        return self.decode + self.prefill_tokens


@dataclass
class ReplicaRun:
    """What one replica's loop measured (request-seconds, counts) and its iterations
    (``batches``, in order)."""

    iterations: int = 0
    busy_s: float = 0.0
    queue_area: float = 0.0
    system_area: float = 0.0
    preemptions: int = 0
    free_blocks: int = 0
    batches: list[IterationRecord] = field(default_factory=list)


@dataclass
class ServingRun:
    """A finished run: every request (completed or rejected) and the loops' counts."""

    requests: list[Request]
    replicas: list[ReplicaRun] = field(default_factory=list)


#: Collects a started run once the environment has run.
Collect = Callable[[], ServingRun]


class Replica:
    """One replica's process on ``env`` (see the module docstring): its ``scheduler``,
    the iteration ``costs``, the model's ``context_length`` (tokens), the ``requests``
    it is given (sorted by arrival; :meth:`deliver` appends more), ``clients``: at most
    that many requests in flight (None: no cap; a request is sent at its arrival or,
    when every slot is taken, when one frees, and its ``arrival_at`` is that time) and
    ``completed``, told the requests each iteration completes. A replica is given all
    its requests, or has them all delivered (in time order, as the environment runs),
    not both. ``async_scheduling``: the scheduling lag of vLLM's ``--async-scheduling``
    (module docstring). The process starts at construction; :attr:`stats` is what it
    measured."""

    def __init__(
        self,
        env: simpy.Environment,
        scheduler: Scheduler,
        costs: IterationCosts,
        context_length: int,
        requests: list[Request],
        clients: int | None = None,
        completed: Completed | None = None,
        async_scheduling: bool = False,
    ):
        self.env, self.sched, self.costs = env, scheduler, costs
        self.async_scheduling = async_scheduling
        self.context_length, self.clients = context_length, clients
        self.requests, self.completed = list(requests), completed
        self.stats = ReplicaRun(free_blocks=scheduler.free_blocks)
        self.now, self._next, self._in_system = float(env.now), 0, 0
        self._started = self.now  # the start of the last iteration run
        # when each free client slot freed (vLLM's benchmark semaphore): a heap
        self._slots = [-math.inf] * clients if clients is not None else None
        self._wake: simpy.Event | None = None
        # given all its requests (none delivered later): its next admission is known
        self._closed = bool(self.requests)
        self.process = env.process(self._loop())

    def deliver(self, request: Request) -> None:
        """``request`` arrives now (its ``arrival_at`` is the environment's time)."""
        request.arrival_at = float(self.env.now)
        self.requests.append(request)
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()

    def _loop(self) -> Generator[simpy.Event, object, None]:
        while True:
            seen = self._started if self.async_scheduling else self.now
            if self.sched.idle:
                if self._next == len(self.requests):
                    self._wake = self.env.event()
                    yield self._wake
                    self._wake = None
                self.now = max(self.now, self.requests[self._next].arrival_at)
                yield from self._hold()
                seen = math.inf  # an idle replica sees an arrival at once
            self._admit(seen)
            plan = self.sched.schedule(self.now)
            if not plan.chunks:
                if self.sched.idle:
                    continue  # every arrival so far was rejected: wait for the next
                raise SimulationError("serving: the scheduler made no progress")
            assert plan.batch is not None
            yield from self._iterate(plan.batch, plan.passes)
            done = self.sched.finish(plan, self.now)
            self._in_system -= len(done)
            if self._slots is not None:
                for _ in done:
                    heapq.heappush(self._slots, self.now)
            self.stats.preemptions = self.sched.preemptions
            self.stats.free_blocks = self.sched.free_blocks
            if self.completed is not None and done:
                self.completed(done)
            if self._closed:
                yield from self._run_ahead()

    def _run_ahead(self) -> Generator[simpy.Event, object, None]:
        """Run the decode iterations that repeat the last one's batch
        (:meth:`Scheduler.decode_run`) up to the next admission, timing and recording
        each as :meth:`_iterate` does (:meth:`_account`) but scheduling once: the same
        numbers as the iteration-by-iteration loop, to the bit (the clock adds the same
        times in the same order), at a fraction of its cost. Only for a replica given all its
        requests, whose next admission is known in advance."""
        run = self.sched.decode_run()
        if run is None:
            return
        admit_at = math.inf
        if self._next < len(self.requests) and (self._slots is None or self._slots):
            admit_at = self.requests[self._next].arrival_at
        done = 0
        while done < run.iterations and admit_at > self.now:
            batch = run.batch(done)
            self._account(batch, self.costs.time_s(batch))
            done += 1
        self.sched.advance_decode(done)
        yield from self._hold()

    def _hold(self) -> Generator[simpy.Event, object, None]:
        """Hold the environment until the replica's own clock."""
        if self.now > self.env.now:
            yield self.env.timeout(self.now - self.env.now)

    def _iterate(
        self, batch: ReplicaBatch, passes: list[ReplicaBatch]
    ) -> Generator[simpy.Event, object, None]:
        """Run one iteration of ``batch`` from :attr:`now` (in one pass, or as ``passes``
        one after the other, each timed as an iteration), integrating the queues."""
        dt = sum(map(self.costs.time_s, passes)) if passes else self.costs.time_s(batch)
        self._account(batch, dt)
        yield from self._hold()

    def _account(self, batch: ReplicaBatch, dt: float) -> None:
        """Record an iteration of ``batch`` taking ``dt`` seconds from :attr:`now`,
        integrate the queues over it and advance the replica's clock."""
        stats = self.stats
        stats.batches.append(
            IterationRecord(self.now, dt, batch.decode, batch.chunks, batch.chunk_tokens)
        )
        self._started = self.now
        stats.queue_area += len(self.sched.waiting) * dt
        stats.system_area += self._in_system * dt
        self.now += dt
        stats.busy_s += dt
        stats.iterations += 1

    def _admit(self, seen: float = math.inf) -> None:
        """Admit every request arrived by :attr:`now` and strictly before ``seen`` (the
        scheduling decision's time, module docstring; ``inf``: every one by now);
        under ``clients`` each takes the slot freed first and is sent at its arrival or
        at that slot's freeing, whichever is later (vLLM's benchmark: a request waits on
        a semaphore, then is sent)."""
        requests, now, slots = self.requests, self.now, self._slots
        while self._next < len(requests) and requests[self._next].arrival_at <= now:
            if slots is not None and not slots:
                break
            req = requests[self._next]
            sent = req.arrival_at if slots is None else max(req.arrival_at, slots[0])
            if sent >= seen:
                break
            self._next += 1
            if slots is not None:
                heapq.heappop(slots)
                req.arrival_at = sent
            queued = self._arrive(req)
            self._in_system += queued
            if slots is not None and not queued:
                heapq.heappush(slots, req.arrival_at)  # a rejected request frees its slot

    def _arrive(self, req: Request) -> bool:
        """Queue ``req``, or reject it (it cannot fit the cache alone or the context);
        True when queued."""
        if not self.sched.fits_alone(req) or req.total_tokens + 1 > self.context_length:
            req.rejected = True
            return False
        self.sched.enqueue(req, req.arrival_at)
        self.stats.queue_area += self.now - req.arrival_at
        self.stats.system_area += self.now - req.arrival_at
        return True
