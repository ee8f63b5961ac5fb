"""Serving: an LLM inference service simulated on the chip, network and engine models.

* :mod:`.costs`: one iteration's time (engine runs cached by batch-shape bucket);
* :mod:`.memory`: weights, activations and the paged KV cache per chip;
* :mod:`.scheduler`: continuous batching, chunked prefill, preemption by recomputation
  (:mod:`.policies`: the ``SCHEDULERS`` registry of admission orders, ``fcfs`` shipped);
* :mod:`.requests`: arrivals (Poisson, gamma, trace CSV) and token counts;
* :mod:`.service`: a deployment and its replicas, each a SimPy process over iterations
  (:mod:`.replica`) on the engine's environment;
* :mod:`.shared`: the host simulation whose clock and network the replicas and KV
  transfers use, alone or joined with a training job (``run_shared``);
* :mod:`.metrics`: TTFT, TPOT, end-to-end latency, throughput, goodput at an SLO;
* :mod:`.disaggregated`: prefill and decode on separate replicas, KV moved between as
  flows on the host's network;
* :mod:`.capacity`: the highest rate meeting an SLO (bisection);
* :mod:`.plots`: the latency-vs-rate curve;
* :mod:`.perf_per_dollar`: performance per dollar between two deployments;
* :mod:`.options`: the options of a run, one typed model that ``tpusim serve`` fills
  from its flags and a ``kind: serving`` workload is (:mod:`.option_error`: a bad
  option found once the deployment is loaded);
* :mod:`.run`: what ``tpusim serve`` and ``kind: serving`` run (:mod:`.rows`: its JSON
  rows' type).
"""

from tpusim.serving.metrics import Slo, summary
from tpusim.serving.options import ServeOptions, ServeSpec
from tpusim.serving.service import Deployment, Service

__all__ = ["Deployment", "ServeOptions", "ServeSpec", "Service", "Slo", "summary"]
