"""The measured band of one plan (:mod:`commcost.analyses.uncertainty`'s module docstring, **plan**): every collective
at ``r`` times its prediction by its own group's class (:func:`commcost.comm.band.composed_band`), exposed
communication and the step re-priced by :func:`commcost.analyses.plan.plan.plan` with the scaled model.

A module of its own, re-exported by :mod:`commcost.analyses.uncertainty`, so that ``commcost search``'s robust rank
(:func:`commcost.analyses.plan.search.rank_robust`) prices the plan's band without loading the drill's budget.
"""

from __future__ import annotations

from dataclasses import dataclass

from commcost.analyses.plan.plan import plan
from commcost.comm.band import band_class, band_ratios, composed_band

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from commcost.analyses.plan.plan import Plan, PlanInputs
    from commcost.comm.model import CommModel
    from commcost.comm.topology import Topology

__all__ = ["PlanBand", "plan_band"]

Edges = tuple[float, float]


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
