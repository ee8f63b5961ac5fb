"""Batch policies: how a replica's scheduler forms one iteration's batch
(:mod:`tpusim.serving.scheduler`), a family that grows by registration.

A policy's ``form`` fills the scheduler's next iteration
(:class:`~tpusim.serving.scheduler.Iteration`) with two steps the scheduler gives
(:class:`Forming`, the narrow view a policy has): ``run_running``
(the running requests in admission order, each its pending tokens within the budget,
preempting the youngest when the cache is full) and ``admit`` (waiting
requests in the admission policy's order, :mod:`tpusim.serving.policies`, while the
budget, sequence slots and blocks allow; ``whole``: a prompt that does not fit the
budget left is never chunked, it stops admission). ``pad`` gives the tokens a prefill
chunk is computed at (an engine compiled for fixed shapes pads a prompt to a bucket);
``whole_prompts`` says whether a prompt longer than the token budget can never run
(such a request is rejected at arrival, as vLLM V0 ignores it).

The shipped policies, and the sources they follow:

* ``vllm-v1`` (the default): vLLM V1's scheduler (``vllm/v1/core/sched/scheduler.py``
  ``Scheduler.schedule``): the running requests first, then waiting ones, decodes and
  chunked prefills mixed in one iteration under ``max_num_batched_tokens``.
* ``prefill-first``: vLLM V0's default scheduler without chunked prefill (v0.7.2,
  ``vllm/core/scheduler.py``: ``_schedule_default``, lines 1051-1091, calls
  ``_schedule_prefills`` with ``enable_chunking=False``, lines 895-1049, and "Don't
  schedule decodes if prefills are scheduled", line 1087); Orca-style
  iteration-level scheduling without chunks. An iteration prefills the whole prompts
  of the waiting requests that fit the budget, the free sequence slots (the running
  requests count against ``max_num_seqs``, lines 1065-1067) and the blocks, stopping
  at the first that does not (lines 969-1017); when none can be admitted it decodes
  every running request (``_schedule_running``, preemption by recomputation of the
  most recently admitted). A recomputation longer than the budget runs alone (V0
  ignores it: not simulated).
* ``prefill-first-serial``: ``prefill-first`` as vLLM V0's TPU model runner executes
  it (v0.7.2, ``vllm/worker/tpu_model_runner.py``): the prompts of a prefill iteration
  run one at a time, batch size 1, "because the FlashAttention kernel does not support
  ragged inputs" (``_prepare_prompt``, lines 395-404, and ``execute_model``, lines
  634-694), each padded to the next power of two, at least 16
  (``_get_padded_prefill_len``, lines 868-874); their first tokens are returned
  together after the loop. Each pass is timed as an iteration, host time included (an
  assumption: torch_xla traces and launches each call from the host). The decode
  batch's padding to 8 or a multiple of 16 (``_get_padded_batch_size``, lines 877-884)
  is not simulated.
* ``jetstream-interleaved``: JetStream's orchestrator in interleaved mode (one slice
  prefills and generates; AI-Hypercomputer/JetStream at 93de590, the version of the
  JetStream-MaxText recipes of October 2024, ``jetstream/core/orchestrator.py``): the
  prefill thread prefills one request per call (lines 495-521), its prompt padded to
  the nearest prefill bucket (``jetstream/engine/token_utils.py``
  ``DEFAULT_PREFILL_BUCKETS`` 16, 32, ... and ``take_nearest_length``, lines 36-58 and
  127-148: powers of two from 16, capped at ``max_prefill_length``); the generate
  thread inserts prefilled requests into free decode slots and, in interleaved mode,
  "only generate[s] if all slots are full or corresponding prefill queue is empty"
  (lines 217-219 and 666-675), then steps every occupied slot (lines 734-737). So an
  iteration prefills one prompt while a request waits and a slot
  (``max_concurrent_decodes``, here ``max_sequences``) is free, and generates
  otherwise; there is no fixed number of prefills between generate steps. The
  generate step is MaxText's compiled fixed shape (AI-Hypercomputer/maxtext at 5172e9e,
  October 2024): every slot of the decode state, each attending over its whole cache
  of ``max_target_length`` positions (:data:`MAXTEXT_TARGET_LENGTH`), since
  ``use_ragged_attention`` is off by default (``MaxText/configs/base.yml`` line 445)
  and decode then takes the dot-product attention over the prefill and autoregressive
  caches (``MaxText/layers/attentions.py`` lines 200-221 and 618).

A new policy is a :class:`BatchPolicy` and one ``BATCH_POLICIES.register`` call
(``repeats_decode=True`` only if, with nothing waiting, it always runs every running
request: the replica then skips asking it during a run of identical decode
iterations, with the same numbers); the
``batching`` option of ``tpusim serve`` and ``kind: serving`` and the ``batching:``
term of a server profile name it.
"""

from __future__ import annotations

from collections.abc import Callable, Sized
from dataclasses import dataclass
from typing import Annotated, Protocol

from pydantic import AfterValidator

from tpusim.registry import Registry

__all__ = [
    "BATCH_POLICIES",
    "DEFAULT_BATCHING",
    "BatchPolicy",
    "BatchingName",
    "Forming",
    "bucket_tokens",
    "power_of_two_tokens",
]

#: The batching of vLLM V1, the engine of the newest shipped serving figures.
DEFAULT_BATCHING = "vllm-v1"
#: JetStream's smallest prefill bucket (``DEFAULT_PREFILL_BUCKETS[0]``, tokens).
MIN_PREFILL_BUCKET = 16
#: MaxText's cache length per decode slot, ``max_target_length`` (tokens): its default
#: (``MaxText/configs/base.yml`` line 317 at 5172e9e, October 2024; published), as the
#: JetStream-MaxText recipes' server commands also set it.
MAXTEXT_TARGET_LENGTH = 2048


class Forming(Protocol):
    """What a policy sees of the scheduler (:class:`~tpusim.serving.scheduler.Scheduler`)
    while it forms an iteration: its limits, the running requests, how many requests the
    iteration has ``scheduled`` so far and its two steps (see the module docstring)."""

    max_tokens: int
    max_sequences: int

    @property
    def running(self) -> Sized: ...

    @property
    def scheduled(self) -> int: ...

    def run_running(self, budget: int, now: float) -> tuple[int, bool]: ...

    def admit(
        self, budget: int, now: float, whole: bool = False, seats: int | None = None
    ) -> int: ...


#: Forms the scheduler's next iteration at ``now``: ``form(scheduler, now)``.
Form = Callable[[Forming, float], None]


def _unpadded(tokens: int, max_tokens: int) -> int:
    return tokens


@dataclass(frozen=True)
class BatchPolicy:
    """A batch policy (see the module docstring): ``form`` fills an iteration, ``pad``
    gives the tokens a prefill chunk of ``tokens`` is computed at under a budget of
    ``max_tokens``, ``whole_prompts`` whether a prompt longer than the budget can never
    run, ``slot_tokens`` the cache length of a fixed-shape decode step (every sequence
    slot attends over that many cached tokens, whatever its own context; None: the
    running sequences over their own contexts), ``serial_prefills`` whether the prompts
    of a prefill-only iteration run as separate forward passes one after the other
    (each timed as an iteration of its own; their first tokens all come at the end),
    ``repeats_decode`` whether, with no request waiting, it always runs every running
    request (each its pending tokens, as :meth:`Forming.run_running` gives them): then a
    replica may run ahead over the repeated decode iterations
    (:meth:`~tpusim.serving.scheduler.Scheduler.decode_run`; a policy that does not
    declare it is asked every iteration), and a one-line ``description``."""

    description: str
    form: Form
    pad: Callable[[int, int], int] = _unpadded
    whole_prompts: bool = False
    slot_tokens: int | None = None
    serial_prefills: bool = False
    repeats_decode: bool = False


def vllm_v1(sched: Forming, now: float) -> None:
    """Running requests first, then waiting ones (unless one was preempted), chunks
    within the budget (vLLM V1)."""
    budget, preempted = sched.run_running(sched.max_tokens, now)
    if not preempted:
        sched.admit(budget, now)


def prefill_first(sched: Forming, now: float) -> None:
    """Whole prompts of the waiting requests that fit; else decode (vLLM V0)."""
    sched.admit(sched.max_tokens, now, whole=True)
    if not sched.scheduled:
        sched.run_running(sched.max_tokens, now)


def jetstream_interleaved(sched: Forming, now: float) -> None:
    """One whole prompt while a slot is free; else generate (JetStream interleaved)."""
    if len(sched.running) < sched.max_sequences:
        sched.admit(sched.max_tokens, now, whole=True, seats=1)
    if not sched.scheduled:
        sched.run_running(sched.max_tokens, now)


def power_of_two_tokens(tokens: int, max_tokens: int) -> int:
    """vLLM V0's TPU prefill length of a ``tokens`` prompt: the next power of two, at
    least :data:`MIN_PREFILL_BUCKET` (``_get_padded_prefill_len``; no cap)."""
    return max(MIN_PREFILL_BUCKET, 1 << (tokens - 1).bit_length())


def bucket_tokens(tokens: int, max_tokens: int) -> int:
    """JetStream's prefill length of a ``tokens`` prompt: the next power of two from
    :data:`MIN_PREFILL_BUCKET`, capped at ``max_tokens`` (``max_prefill_length``)."""
    bucket = MIN_PREFILL_BUCKET
    while bucket < tokens:
        bucket *= 2
    return min(bucket, max(max_tokens, tokens))


BATCH_POLICIES: Registry[BatchPolicy] = Registry("batch policy")
BATCH_POLICIES.register(
    DEFAULT_BATCHING,
    BatchPolicy(
        "vLLM V1: decodes and chunked prefills mixed under the token budget",
        vllm_v1,
        repeats_decode=True,
    ),
)
BATCH_POLICIES.register(
    "prefill-first",
    BatchPolicy(
        "vLLM V0 default / Orca: prefill-only iterations of whole prompts, else decode-only",
        prefill_first,
        whole_prompts=True,
        repeats_decode=True,
    ),
)
BATCH_POLICIES.register(
    "prefill-first-serial",
    BatchPolicy(
        "vLLM V0 on TPU: prefill-first, each prompt its own forward pass padded to a power of two",
        prefill_first,
        pad=power_of_two_tokens,
        whole_prompts=True,
        serial_prefills=True,
        repeats_decode=True,
    ),
)
BATCH_POLICIES.register(
    "jetstream-interleaved",
    BatchPolicy(
        "JetStream interleaved: one prompt per prefill, padded to a power-of-two bucket, "
        "while a slot is free; else a generate step",
        jetstream_interleaved,
        pad=bucket_tokens,
        whole_prompts=True,
        slot_tokens=MAXTEXT_TARGET_LENGTH,
        repeats_decode=True,
    ),
)


def _known(name: str) -> str:
    """``name`` when it is a registered policy; raises UnknownEntryError (a ValueError)
    naming the known ones."""
    BATCH_POLICIES.get(name)
    return name


#: A registered batch policy's name, checked when an options model is validated.
BatchingName = Annotated[str, AfterValidator(_known)]
