"""``tpusim plan``: search a training step's layouts (mesh roles, remat, microbatches)
under the memory model and rank them by simulated step time.

Modules, one stage each: :mod:`.candidates` (what is searched), :mod:`.memory` (the
builder's checks and the closed-form memory model), :mod:`.estimate` (the closed-form
screen), :mod:`.rank` (simulation as the training_step workload runs it) and
:mod:`.search` (the stages in order).
"""

from tpusim.planner.search import PlanRequest, PlanResult, plan_layouts

__all__ = ["PlanRequest", "PlanResult", "plan_layouts"]
