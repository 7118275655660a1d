"""The published layout of a searched model, GPU count, sequence and batch, priced as search prices its own.

``hardware/published_layouts.json`` holds the layouts of published training runs (generated from
tests/data/published_runs.csv and published_moe_runs.csv, with their sources); ``commcost search``
prints how its best compares with the one of its setup: step, the band's upper edge, memory, and why.
"""

from __future__ import annotations

from dataclasses import dataclass

from commcost.analyses.plan.plan import plan
from commcost.analyses.plan.search import SearchResult, plan_inputs_of
from commcost.analyses.plan.search_inputs import SearchInputs
from commcost.analyses.plan.space import RECOMPUTE
from commcost.analyses.uncertainty import plan_band
from commcost.core.errors import InputError
from commcost.hardware.registry import systems
from commcost.workload.stacks import PublishedLayout, published_layouts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.analyses.plan.plan import Plan, PlanInputs
    from commcost.comm.model import CommModel

__all__ = ["PublishedComparison", "published_comparison", "published_plan_inputs"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedComparison:
    """A published layout of the searched model, GPU count, sequence and batch, priced as the search
    prices its own configurations."""

    layout: PublishedLayout
    """The published run (``hardware/published_layouts.json``)."""
    plan: Plan
    """Its plan under the search's inputs (hardware, precision, stack and compute options)."""
    robust_step_s: float | None
    """Its step at the measured band's upper edge (None without a band: no system preset)."""
    fragile: bool
    """Its memory leaves less than the search's headroom (:meth:`commcost.workload.memory.MemoryBreakdown.fragile`)."""


def published_plan_inputs(inp: SearchInputs, row: PublishedLayout) -> PlanInputs:
    """The :class:`~commcost.analyses.plan.plan.PlanInputs` of a published layout under the search's inputs
    (through :func:`plan_inputs_of`, as a grid row: DDP's default buckets)."""
    spec = inp.space.spec
    d = row.gpus // (row.tp * row.pp * row.cp)
    return plan_inputs_of(inp, {"d": d, "t": row.tp, "p": row.pp, "v": row.vp, "c": row.cp, "e": row.ep,
                                "zero": row.zero, "sp": int(row.sequence_parallel), "rc": RECOMPUTE.index(row.recompute),
                                "b": row.micro_batch, "uneven": int(spec.layers % (row.pp * row.vp) != 0),
                                "etp": row.etp, "cap": 0})


def published_comparison(result: SearchResult, model: CommModel, topology) -> PublishedComparison | None:
    """The published layout of the searched model (by preset name), GPU count, sequence and global batch,
    priced under the search's inputs; None when none is published (or several GPU counts were searched).
    Of several, the one run on the search's GPU, then at its precision, then on its stack."""
    inp = result.inputs
    sp = inp.space
    if len(sp.gpus) != 1:
        return None
    rows = published_layouts(sp.spec.name, sp.gpus[0], sp.seq, sp.global_batch)
    table = systems()
    rows = sorted(rows, key=lambda r: (table.get(r.system, {}).get("gpu") != inp.gpu, r.precision != inp.precision,
                                       r.stack != inp.stack))
    for row in rows:
        try:
            pinp = published_plan_inputs(inp, row)
        except InputError:          # a layout the searched shape cannot hold (another node size)
            continue
        p = plan(pinp, model)
        band = None if topology is None else plan_band(pinp, p, model, topology)
        upper = None if topology is None else (p.step_s if band is None else band.step_s[1])
        return PublishedComparison(layout=row, plan=p, robust_step_s=upper,
                                   fragile=p.memory.fragile(inp.headroom))
    return None
