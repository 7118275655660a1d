"""The measured band of what ``budget``, ``timeline`` and ``plan`` compose from collectives.

A system preset's collective has a band: the range measured clusters of its class fell in around
the preset's prediction (:mod:`commcost.comm.band`, ratios ``r_lo``, ``r_hi`` from ``bands.json``).
For the quantities composed from many collectives the rule is :func:`commcost.comm.band.composed_band`'s,
stated once there: every collective of a class at ``r`` times its prediction, ``r = r_lo`` at the
low edge and ``r_hi`` at the high edge; the quantity recomputed by the code that computed the point,
every decision held (the algorithm chosen, the bucket caps, the layout) and compute unchanged.
What that gives here:

* **budget** ``T``: ``(r_lo T, r_hi T)`` exactly (one all-reduce). First-order exposed
  ``max(T(c_tail), T - W)`` and the simulated exposed time at DDP's default and at the recommended
  cap: recomputed with every bucket's all-reduce at the edge (``max`` and the bucket timeline are not
  linear: the exposed time may stay 0, or grow faster than ``r``).
* **timeline** wire time ``T_w = sum T_i``: ``r T_w`` (one group, one class). Exposed ``E`` and
  the step ``k t_c + E + t_opt``: re-simulated at the same caps.
* **plan** every collective by its own group's class (TP inside a node ``one_node``, DP across
  nodes ``multi_node``, across pods of NVL72 racks ``multi_pod``): wire time the sum of the scaled
  lines; exposed communication and the step re-priced by :func:`commcost.analyses.plan.plan.plan` with the
  scaled model, so a collective that hides (ZeRO-1's all-gather behind the forward, DP buckets in
  the backward window) moves the step only by what its edge no longer hides, and the pipeline
  bubble ``(p-1) t_mb / v`` moves with the critical communication inside ``t_mb``
  (:mod:`commcost.analyses.plan.band`, a module of its own so that ``search``'s robust rank reaches the plan's band
  without the drill's budget).

Only for a system preset alone (``--system`` without ``--profile``); none of this runs for the
drill's flat link or a calibrated profile.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from commcost.comm.band import band_class, band_ratios, composed_band
from commcost.comm.model import CommModel
from commcost.comm.topology import Topology
from commcost.analyses.plan.band import PlanBand, plan_band  # re-exported: the plan's band, search's too
from commcost.comm.collectives import Collective
from commcost.step.ddp_buckets import DdpBucketCaps
from commcost.step.timeline import gradient_stream
from commcost.step.timeline import simulate_timeline

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from commcost.analyses.drill.budget import Budget
    from commcost.step.timeline import Timeline, TimelineInputs

__all__ = ["BudgetBand", "budget_band", "TimelineBand", "timeline_band", "PlanBand", "plan_band"]

Edges = tuple[float, float]


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetBand:
    """The band of the budget's all-reduce and of what it leaves exposed (module docstring)."""

    band_class: str
    """The data-parallel group's class (:func:`commcost.comm.band.band_class`)."""
    ratios: Edges
    """``(r_lo, r_hi)`` of that class."""
    allreduce_s: Edges
    """``(r_lo T, r_hi T)``: the gradient's all-reduce, seconds."""
    first_order_exposed_s: Edges
    """``max(T(c_tail), T - W)`` at each edge, seconds."""
    default_exposed_s: Edges | None
    """Simulated exposed time with DDP's default buckets at each edge (None: not simulated), seconds."""
    best_exposed_s: Edges | None
    """The same at the point's recommended cap (held, not re-chosen), seconds."""


def budget_band(b: Budget, topology: Topology) -> BudgetBand | None:
    """The band of ``b`` computed on the system preset ``topology``; None when there is no all-reduce
    (``P = 1``)."""
    # here, not at the top: ``commcost plan`` (plan_band) does not load the drill's analysis
    from commcost.analyses.drill.budget import _step_analysis, budget_timeline_inputs

    inp, T = b.inputs, b.allreduce
    if T.total_s == 0:
        return None
    tail_budget_s = inp.tail_budget_fraction * inp.grad_accum * inp.step_s
    ov = b.overlap
    stream = gradient_stream(budget_timeline_inputs(inp)) if ov is not None else None

    def price(edge: CommModel) -> tuple[float, float, float | None, float | None]:
        e_inp = replace(inp, comm=edge)
        T_e = edge.cost("all_reduce", b.message_bytes, inp.gpus, inp.algorithm)
        first = _step_analysis(e_inp, T_e, None, tail_budget_s).first_order_exposed_s
        if ov is None:
            return T_e.total_s, first, None, None
        tl = budget_timeline_inputs(e_inp)
        return (T_e.total_s, first,
                simulate_timeline(tl, _caps(ov.default), stream=stream).exposed_s,
                simulate_timeline(tl, _caps(ov.best), stream=stream).exposed_s)

    lo, hi = composed_band(price, inp.comm, topology)
    cls = band_class(T, topology)
    return BudgetBand(band_class=cls, ratios=band_ratios()[cls], allreduce_s=(lo[0], hi[0]),
                      first_order_exposed_s=(lo[1], hi[1]),
                      default_exposed_s=None if ov is None else (lo[2], hi[2]),
                      best_exposed_s=None if ov is None else (lo[3], hi[3]))


@dataclass(frozen=True, slots=True, kw_only=True)
class TimelineBand:
    """The band of one simulated step (module docstring): the same caps at both edges."""

    band_class: str
    """The data-parallel group's class."""
    ratios: Edges
    """``(r_lo, r_hi)`` of that class."""
    wire_s: Edges
    """``T_w`` at each edge, seconds."""
    exposed_s: Edges
    """``E`` at each edge, seconds."""
    step_s: Edges
    """``k t_c + E + t_opt`` at each edge, seconds."""


def timeline_band(inp: TimelineInputs, tl: Timeline, topology: Topology) -> TimelineBand | None:
    """The band of ``tl`` (simulated from ``inp``) on the system preset ``topology``; None for one GPU."""

    if inp.gpus == 1 or tl.wire_s == 0:
        return None
    stream = gradient_stream(inp)

    def price(edge: CommModel) -> tuple[float, float, float]:
        e = simulate_timeline(replace(inp, comm=edge), _caps(tl), stream=stream)
        return e.wire_s, e.exposed_s, e.step_s

    lo, hi = composed_band(price, inp.comm, topology)
    cls = band_class(inp.comm.cost(Collective.ALL_REDUCE, tl.message_bytes, inp.gpus, inp.algorithm), topology)
    return TimelineBand(band_class=cls, ratios=band_ratios()[cls], wire_s=(lo[0], hi[0]),
                        exposed_s=(lo[1], hi[1]), step_s=(lo[2], hi[2]))


def _caps(tl: Timeline):

    return DdpBucketCaps(bucket_cap_bytes=tl.bucket_cap_bytes, first_bucket_cap_bytes=tl.first_bucket_cap_bytes)
