"""A vLLM-style scheduler for one replica: continuous batching under a token budget,
chunked prefill, a paged KV cache and preemption by recomputation.

Every request has ``computed`` tokens in the cache and ``generated`` output tokens;
its *pending* tokens are ``prompt + generated - computed`` (the prompt, or the last
sampled token in decode, or everything again after a preemption). Each iteration
(:meth:`Scheduler.schedule`) is formed by the replica's batch policy
(:mod:`tpusim.serving.batching`) from two steps, :meth:`Scheduler.run_running` (1
below) and :meth:`Scheduler.admit` (2); the default, vLLM's V1 scheduler, takes both:

1. running requests in admission order get ``min(pending, budget left)`` tokens
   (``max_tokens`` per iteration, ``max_sequences`` sequences); each needs blocks of
   ``block_size`` tokens to cover its cache after the iteration. When the free blocks
   do not suffice, the most recently admitted running request is *preempted*: its
   blocks are freed, ``computed`` drops to 0 and it goes back to the front of the
   waiting queue, to be prefilled again (recomputation) with its generated tokens;
2. if nothing was preempted, waiting requests are admitted in the order of the
   scheduler policy (:mod:`tpusim.serving.policies`; default first come, first
   served) while budget, sequence slots and blocks allow (a prompt longer than the
   budget left is chunked; a policy of whole prompts stops admission there instead).

After the iteration (:meth:`Scheduler.finish`) each scheduled request has its chunk
in the cache; one whose pending tokens are all computed samples a token (its first:
the time to first token), and one with all its output tokens completes and frees its
blocks. Nothing is lost: a request that fits the cache alone always completes (the
oldest running request is never preempted for a younger one), and one that cannot
fit even alone is rejected at arrival by the caller.

Prefix caching (``prefix_tokens`` > 0): the first ``prefix_tokens`` tokens of a
prompt, a prefix every request of the stream may share (a system prompt), are held
once in the cache, pinned, in whole blocks (vLLM caches full blocks only). A request
that hits it (``prefix_hit``) is admitted with its cached whole blocks already
computed and shared, not allocated: it prefills only the rest of its prompt, its
attention still reads the prefix. A preempted request keeps its hit.

Speculative decoding (``draft_tokens`` k > 0): a request in decode runs its last
token and k draft tokens through the model in one iteration (a chunk of ``k + 1``
tokens attending to its context, within the token budget and its remaining output);
each draft is accepted with probability ``acceptance`` until the first rejection,
and the iteration yields the accepted drafts plus one token of the model's own
(``(1 - a^(k+1)) / (1 - a)`` on average). Rejected drafts' KV is discarded. The
drafts are assumed free to propose (an n-gram or prompt-lookup proposer); the draws
come from one generator seeded per replica, so runs repeat.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from tpusim.serving.batching import BATCH_POLICIES, DEFAULT_BATCHING, BatchPolicy
from tpusim.serving.costs import ReplicaBatch
from tpusim.serving.policies import DEFAULT_SCHEDULER, SCHEDULERS, SchedulerPolicy


@dataclass(eq=False)
class Request:
    """One request and what happened to it (times in seconds from the run's start;
    ``queued_s`` the total time spent waiting, over every preemption)."""

    id: int
    arrival_at: float
    prompt_tokens: int
    output_tokens: int
    computed: int = 0
    generated: int = 0
    blocks: int = 0
    preemptions: int = 0
    queued_at: float = 0.0
    queued_s: float = 0.0
    first_token_at: float | None = None
    finished_at: float | None = None
    rejected: bool = False
    running: bool = False
    prefix_hit: bool = False
    shared_blocks: int = 0

    @property
    def pending(self) -> int:
        """Tokens to compute before the next sample."""
        return self.prompt_tokens + self.generated - self.computed

    @property
    def total_tokens(self) -> int:
        """Tokens the request keeps in the cache at most (its last token needs none)."""
        return self.prompt_tokens + self.output_tokens - 1


@dataclass
class Iteration:
    """One iteration: the requests scheduled with their chunk sizes, the batch, and the
    forward passes it runs one after the other (one per prompt under a batch policy of
    ``serial_prefills``; empty: the batch in one pass)."""

    chunks: list[tuple[Request, int]] = field(default_factory=list)
    batch: ReplicaBatch | None = None
    passes: list[ReplicaBatch] = field(default_factory=list)


@dataclass(frozen=True)
class DecodeRun:
    """Decode iterations that repeat one batch (:meth:`Scheduler.decode_run`): the
    ``first``, each next one ``kv_step`` cached tokens longer (SRAM holding the first
    ``sram_tokens``), ``iterations`` of them at most."""

    first: ReplicaBatch
    kv_step: int
    sram_tokens: int
    iterations: int

    def batch(self, j: int) -> ReplicaBatch:
        """The ``j``-th iteration's batch (from 0)."""
        if not j or not self.kv_step:
            return self.first
        kv = self.first.kv_tokens + j * self.kv_step
        return dataclasses.replace(self.first, kv_tokens=kv, sram_tokens=min(kv, self.sram_tokens))


class Scheduler:
    """The scheduler state of one replica: ``total_blocks`` KV blocks of ``block_size``
    tokens (the first ``sram_blocks`` of them in SRAM), the token budget and sequence
    limit per iteration, the admission ``policy`` (:mod:`tpusim.serving.policies`;
    None: first come, first served) and the ``batching`` policy forming each iteration
    (:mod:`tpusim.serving.batching`; None: vLLM V1's)."""

    def __init__(
        self,
        total_blocks: int,
        block_size: int,
        max_tokens: int,
        max_sequences: int,
        sram_blocks: int = 0,
        prefix_tokens: int = 0,
        draft_tokens: int = 0,
        acceptance: float = 0.0,
        seed: int = 0,
        policy: SchedulerPolicy | None = None,
        batching: BatchPolicy | None = None,
    ):
        self.total_blocks, self.block_size = total_blocks, block_size
        self.max_tokens, self.max_sequences = max_tokens, max_sequences
        self.sram_tokens = sram_blocks * block_size
        self.prefix_blocks = min(prefix_tokens // block_size, total_blocks)
        self.free_blocks = total_blocks - self.prefix_blocks
        self.draft_tokens, self.acceptance = draft_tokens, acceptance
        self.rng = np.random.default_rng(seed)
        self.policy = policy or SCHEDULERS.get(DEFAULT_SCHEDULER)
        self.batching = batching or BATCH_POLICIES.get(DEFAULT_BATCHING)
        self.waiting: deque[Request] = deque()
        self._step = Iteration()  # the iteration being formed
        self.running: list[Request] = []
        self.preemptions = 0

    def blocks_for(self, tokens: int) -> int:
        """Blocks that hold ``tokens`` tokens."""
        return -(-tokens // self.block_size)

    def cached_blocks(self, request: Request) -> int:
        """Whole blocks of the request's prompt found in the prefix cache (at least one
        prompt token is always computed: its last, to sample from)."""
        if not request.prefix_hit:
            return 0
        return min(self.prefix_blocks, (request.prompt_tokens - 1) // self.block_size)

    def fits_alone(self, request: Request) -> bool:
        """Whether the request's whole cache fits when nothing else runs (and, under a
        batch policy of whole prompts, its prompt fits the token budget)."""
        if self.batching.whole_prompts and request.prompt_tokens > self.max_tokens:
            return False
        own = self.blocks_for(request.total_tokens) - self.cached_blocks(request)
        return own <= self.total_blocks - self.prefix_blocks

    def enqueue(self, request: Request, now: float) -> None:
        """A new request joins the back of the waiting queue at ``now``."""
        request.queued_at = now
        self.waiting.append(request)

    @property
    def idle(self) -> bool:
        """Nothing waiting or running."""
        return not self.waiting and not self.running

    def schedule(self, now: float) -> Iteration:
        """The next iteration, as the batch policy forms it (see the module docstring)."""
        step = self._step = Iteration()
        self.batching.form(self, now)
        step.batch = self._batch(step.chunks)
        if self.batching.serial_prefills and not step.batch.decode and step.batch.chunks > 1:
            step.passes = [self._batch([chunk]) for chunk in step.chunks]
        return step

    @property
    def scheduled(self) -> int:
        """Requests in the iteration being formed."""
        return len(self._step.chunks)

    def run_running(self, budget: int, now: float) -> tuple[int, bool]:
        """Add the running requests in admission order to the iteration being formed, each
        ``min(pending, budget left)`` tokens, preempting the youngest when the blocks
        do not suffice; returns the budget left and whether any was preempted."""
        bs, chunks, preempted = self.block_size, self._step.chunks, False
        for req in list(self.running):  # a copy: preemption edits the list
            if budget == 0 or len(chunks) == self.max_sequences:
                break
            if not req.running:  # preempted for an older request
                continue
            chunk = min(self._pending_with_drafts(req), budget)
            need = -(-(req.computed + chunk) // bs) - req.blocks
            if need > self.free_blocks and not self._make_room(req, need, now):
                preempted = True
                continue
            self.free_blocks -= need
            req.blocks += need
            chunks.append((req, chunk))
            budget -= chunk
        return budget, preempted

    def _pending_with_drafts(self, req: Request) -> int:
        """Tokens to run: the pending ones, plus the drafts of a request in decode."""
        pending = req.prompt_tokens + req.generated - req.computed
        if pending != 1 or not req.generated or not self.draft_tokens:
            return pending
        return 1 + min(self.draft_tokens, req.output_tokens - req.generated - 1)

    def _accepted(self, drafts: int) -> int:
        """Drafts accepted before the first rejection, of ``drafts``."""
        if self.acceptance >= 1.0:
            return drafts
        return min(drafts, int(self.rng.geometric(1.0 - self.acceptance)) - 1)

    def _make_room(self, req: Request, need: int, now: float) -> bool:
        """Preempt the youngest running requests until ``need`` blocks are free; False
        when ``req`` itself had to go."""
        while need > self.free_blocks:
            victim = self.running[-1]
            self._preempt(victim, now)
            if victim is req:
                return False
        return True

    def _preempt(self, req: Request, now: float) -> None:
        """Free ``req``'s cache and put it back at the front of the waiting queue."""
        self.running.remove(req)
        req.running = False
        self.free_blocks += req.blocks - req.shared_blocks
        req.blocks, req.computed, req.shared_blocks = 0, 0, 0
        req.preemptions += 1
        self.preemptions += 1
        req.queued_at = now
        self.waiting.appendleft(req)

    def admit(self, budget: int, now: float, whole: bool = False, seats: int | None = None) -> int:
        """Admit waiting requests in the admission policy's order into the iteration
        being formed while budget, sequence slots (``max_sequences`` in the iteration;
        ``whole``: the running requests count too, as vLLM V0) and blocks allow, at
        most ``seats`` (None: no cap); a prompt longer than the budget left is chunked,
        or, ``whole``, stops admission (unless it runs alone: a recomputation longer
        than the budget). Returns the budget left."""
        step = self._step
        taken = len(self.running) if whole else len(step.chunks)
        admitted = 0
        while self.waiting and budget > 0 and taken < self.max_sequences:
            if seats is not None and admitted == seats:
                break
            req = self._next_waiting()
            shared = self.cached_blocks(req) if req.computed == 0 else 0
            start = req.computed + shared * self.block_size
            chunk = min(req.pending - shared * self.block_size, budget)
            if whole and chunk < req.pending - shared * self.block_size and step.chunks:
                break
            if whole:
                chunk = req.pending - shared * self.block_size
            need = self.blocks_for(start + chunk) - req.blocks - shared
            if need > self.free_blocks:
                break
            self._dequeue(req)
            req.queued_s += now - req.queued_at
            self.free_blocks -= need
            req.computed, req.shared_blocks = start, req.shared_blocks + shared
            req.blocks += need + shared
            self.running.append(req)
            req.running = True
            step.chunks.append((req, chunk))
            budget -= min(chunk, budget)
            taken, admitted = taken + 1, admitted + 1
        return budget

    def _next_waiting(self) -> Request:
        """The waiting request the policy admits next (least priority, ties in queue
        order; no priority: the head of the queue)."""
        priority = self.policy.priority
        return self.waiting[0] if priority is None else min(self.waiting, key=priority)

    def _dequeue(self, req: Request) -> None:
        if req is self.waiting[0]:
            self.waiting.popleft()
        else:
            self.waiting.remove(req)

    def _batch(self, scheduled: list[tuple[Request, int]]) -> ReplicaBatch:
        """The iteration's shape: decode sequences (one pending token after a sample),
        prefill chunks (at the batch policy's padded length), cached tokens read and
        causal pairs; under a policy with ``slot_tokens`` the decode is every sequence
        slot over ``slot_tokens`` cached tokens each."""
        decode = chunk_tokens = chunks = kv = 0
        pairs = 0.0
        decode_kv = 0
        for req, chunk in scheduled:
            prior = req.computed
            if chunk == 1 and req.generated:
                decode += 1
                decode_kv += prior + 1
            else:
                computed = self.batching.pad(chunk, self.max_tokens)
                chunks += 1
                chunk_tokens += computed
                kv += prior
                pairs += computed * (prior + (computed + 1) / 2)
        slot = self.batching.slot_tokens
        if slot is not None and decode:  # a fixed-shape step: every slot, whole cache
            decode, decode_kv = self.max_sequences, self.max_sequences * slot
        kv += decode_kv
        sram = min(kv, self.sram_tokens)
        return ReplicaBatch(decode, chunk_tokens, chunks, kv, pairs, sram)

    def decode_run(self) -> DecodeRun | None:
        """The decode iterations that follow as the last one ran, none of them ending a
        request, or None. When nothing waits, no drafts are proposed and every running
        request is in decode and fits one iteration (sequence slots and token budget),
        a batch policy that ``repeats_decode`` schedules the running requests again, one
        token each: the
        same batch, its cache one token longer per sequence, until a request takes its
        last token or the free blocks run short (the iterations counted here stop
        before either)."""
        running, bs = self.running, self.block_size
        if self.waiting or not running or self.draft_tokens:
            return None
        if not self.batching.repeats_decode:
            return None
        if len(running) > min(self.max_sequences, self.max_tokens):
            return None
        if any(not r.generated or r.pending != 1 for r in running):
            return None
        last = min(r.output_tokens - r.generated for r in running) - 1

        def need(k: int) -> int:  # blocks taken by k more tokens of every sequence
            return sum(-(-(r.computed + k) // bs) - r.blocks for r in running)

        lo, hi = 0, max(last, 0)
        while lo < hi:  # the most iterations whose blocks fit (need grows with k)
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if need(mid) <= self.free_blocks else (lo, mid - 1)
        if lo < 1:
            return None
        first = self._batch([(r, 1) for r in running])
        step = 0 if self.batching.slot_tokens is not None else first.decode
        return DecodeRun(first, step, self.sram_tokens, lo)

    def advance_decode(self, iterations: int) -> None:
        """Apply ``iterations`` of a :meth:`decode_run` (the state :meth:`run_running`
        and :meth:`finish` would leave after them, one by one)."""
        bs = self.block_size
        for r in self.running:
            r.computed += iterations
            r.generated += iterations
            blocks = -(-r.computed // bs)
            self.free_blocks -= blocks - r.blocks
            r.blocks = blocks

    def finish(self, step: Iteration, now: float) -> list[Request]:
        """Apply an iteration that ended at ``now``; returns the requests it completed."""
        done = []
        for req, chunk in step.chunks:
            if chunk > req.pending:  # speculative: the last token and chunk - 1 drafts
                accepted = self._accepted(chunk - 1)
                req.computed += 1 + accepted
                req.generated += accepted
            else:
                req.computed += chunk
            if req.prompt_tokens + req.generated > req.computed:
                continue
            req.generated += 1
            if req.first_token_at is None:
                req.first_token_at = now
            if req.generated == req.output_tokens:
                req.finished_at = now
                req.running = False
                self.free_blocks += req.blocks - req.shared_blocks
                req.blocks, req.shared_blocks = 0, 0
                done.append(req)
        if done:
            self.running = [r for r in self.running if r.running]
        return done
