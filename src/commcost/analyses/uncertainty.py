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
  bubble ``(p-1) t_mb / v`` moves with the critical communication inside ``t_mb``.

Only for a system preset alone (``--system`` without ``--profile``); none of this runs for the
drill's flat link or a calibrated profile.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from commcost.comm.band import band_class, band_ratios, composed_band
from commcost.comm.model import CommModel
from commcost.comm.topology import Topology
from commcost.analyses.drill.budget import _step_analysis
from commcost.analyses.drill.budget import budget_timeline_inputs
from commcost.analyses.plan.plan import plan
from commcost.comm.collectives import Collective
from commcost.step.ddp_buckets import DdpBucketCaps
from commcost.step.timeline import gradient_stream
from commcost.step.timeline import simulate_timeline

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from commcost.analyses.drill.budget import Budget
    from commcost.analyses.plan.plan import Plan, PlanInputs
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


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanBand:
    """The band of one plan (module docstring): each collective by its group's class."""

    classes: tuple[str | None, ...]
    """The class of each line of :attr:`commcost.analyses.plan.plan.Plan.comm` (None: no collective, one rank)."""
    ratios: dict[str, Edges]
    """``(r_lo, r_hi)`` of each class used."""
    line_time_s: tuple[Edges, ...]
    """Each line's wire time per step at each edge, seconds."""
    line_exposed_s: tuple[Edges, ...]
    """Each line's exposed time per step at each edge, seconds."""
    wire_s: Edges
    """Communication on the wire per step at each edge, seconds."""
    exposed_comm_s: Edges
    """Exposed communication per step at each edge, seconds."""
    step_s: Edges
    """The step at each edge (compute unchanged), seconds."""


def plan_band(inp: PlanInputs, p: Plan, model: CommModel, topology: Topology) -> PlanBand | None:
    """The band of ``p = plan(inp, model)`` on the system preset ``topology``; None without communication."""

    if not p.comm or p.wire_s == 0:
        return None
    lo, hi = composed_band(lambda edge: plan(inp, edge), model, topology)
    if [line.comm for line in lo.comm] != [line.comm for line in p.comm]:  # the same lines, or no band
        raise AssertionError("the plan's lines differ at the band's edges")
    classes = tuple(_line_class(line, model, topology) for line in p.comm)
    ratios = band_ratios()
    return PlanBand(classes=classes, ratios={c: ratios[c] for c in dict.fromkeys(classes) if c is not None},
                    line_time_s=tuple((a.time_s, b.time_s) for a, b in zip(lo.comm, hi.comm)),
                    line_exposed_s=tuple((a.exposed_s, b.exposed_s) for a, b in zip(lo.comm, hi.comm)),
                    wire_s=(lo.wire_s, hi.wire_s), exposed_comm_s=(lo.exposed_comm_s, hi.exposed_comm_s),
                    step_s=(lo.step_s, hi.step_s))


def _line_class(line, model: CommModel, topology: Topology) -> str | None:
    c = line.comm
    if c.group_size == 1 or c.size_bytes == 0:
        return None
    cost = model.cost(c.op, c.size_bytes, c.group_size, ranks_per_node=c.ranks_per_node)
    return band_class(cost, topology, ranks_per_node=c.ranks_per_node)


def _caps(tl: Timeline):

    return DdpBucketCaps(bucket_cap_bytes=tl.bucket_cap_bytes, first_bucket_cap_bytes=tl.first_bucket_cap_bytes)
