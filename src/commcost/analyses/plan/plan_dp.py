"""A plan's communication line (:class:`CommLine`, the ``comm[]`` rows, worded by
:func:`commcost.analyses.plan.explain.explain`), the stack a plan runs (:func:`plan_stack`) and the timeline its bucket
advice judges (:func:`_advice_inputs`). :mod:`commcost.analyses.plan.plan` re-exports :class:`CommLine` and
:func:`plan_stack`; ``inp`` is its :class:`~commcost.analyses.plan.plan.PlanInputs` (not imported: plan imports this
module)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from commcost.parallel.layout import CommOp
from commcost.step.timeline import TimelineInputs
from commcost.workload.shape import MAX_LAYERS, fits_timeline, model_params
from commcost.workload.stacks import auto_kind, auto_runs_implied, resolve_stack, stack

if TYPE_CHECKING:
    from commcost.comm.model import CommModel

__all__ = ["CommLine", "plan_stack"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CommLine:
    """One kind of collective with its price: the ``comm[]`` rows."""

    comm: CommOp
    """What is sent, how often, over which group."""
    one_s: float
    """T: one collective, seconds (the CommModel)."""
    algorithm: str
    """The algorithm the CommModel chose."""
    time_s: float
    """Time on the wire per step, seconds (``count x T``; DP: the bucketed total)."""
    exposed_s: float
    """Of that, seconds the step waits for."""

    def to_dict(self) -> dict:
        c = self.comm
        return {"dimension": c.dimension, "op": c.op.value, "size_bytes": c.size_bytes, "group_size": c.group_size,
                "ranks_per_node": c.ranks_per_node, "count_per_step": c.count_per_step, "critical": c.critical,
                "algorithm": self.algorithm, "one_s": self.one_s, "time_s": self.time_s, "exposed_s": self.exposed_s,
                "what": c.what}


def plan_stack(inp):
    """The :class:`~commcost.workload.stacks.Stack` ``inp`` runs: its ``stack`` (``auto`` resolved for its layout),
    compiled or not; every stack-dependent term of the plan reads it here."""

    L = inp.layout
    kind = auto_kind(L.zero, L.tp, L.pp, L.cp) if inp.stack == "auto" and auto_runs_implied(L) else None
    return stack(resolve_stack(inp.stack, L)[0], compiled=inp.compiled, auto_kind=kind)


def _advice_inputs(inp, tl_inp: TimelineInputs, total_bytes: float) -> TimelineInputs:
    """The timeline the bucket advice judges: with pure data parallelism of a model the timeline lays out
    (:func:`commcost.workload.shape.fits_timeline`) every rank holds every tensor whole, so the gradients arrive
    tensor by tensor as ``budget`` and ``timeline`` see them (the per-tensor stream,
    :mod:`commcost.step.bucket_advice`); otherwise (a shard of each tensor per rank) at a uniform rate. The step
    itself is priced on the uniform stream, the kernel ``search`` shares."""
    L, spec = inp.layout, inp.spec
    if L.tp * L.pp * L.cp * L.ep != 1 or not fits_timeline(spec) or spec.layers > MAX_LAYERS:
        return tl_inp
    if abs(model_params(spec) * tl_inp.bytes_per_grad - total_bytes) > 1e-9 * total_bytes:
        return tl_inp                       # gradients other than the model's tensors: keep the uniform stream
    return replace(tl_inp, shape=spec, seq=inp.seq)


def _gradient_cost(model: CommModel, shares: list, share_nic: list):
    """``T(c) = sum_i k_i T(op_i, c f_i, P_i, r_i)``: one bucket of ``c`` bytes reduced over each group ``i`` of
    ``shares`` (its collective and its share ``f_i`` of the gradients) at its NICs' share ``k_i``, summed in order.
    Its ``price_many(sizes)`` prices many ``c`` at once and keeps them for its calls: per group one
    ``cost_many`` (element by element ``cost``'s ``total_s``), summed in the same order, so the same floats
    (the bucket advice's sweep, :func:`commcost.step.timeline.best_caps` with ``arrays``; numpy needed)."""
    known: dict[float, float] = {}

    def cost(c_bytes: float) -> float:
        T = known.get(c_bytes)
        if T is None:
            T = sum(k * model.cost(o.op, c_bytes * f, o.group_size, ranks_per_node=o.ranks_per_node).total_s
                    for (o, f), k in zip(shares, share_nic))
        return T

    def price_many(sizes_bytes) -> None:
        import numpy as np

        S = np.array(sorted({float(x) for x in sizes_bytes if x > 0}))    # (np.unique would import numpy.ma)
        if not len(S):
            return
        total = 0
        for (o, f), k in zip(shares, share_nic):
            total = total + k * model.cost_many(o.op, S * f, o.group_size, ranks_per_node=o.ranks_per_node)
        known.update(zip(S.tolist(), np.broadcast_to(total, S.shape).tolist()))

    cost.price_many = price_many                    # type: ignore[attr-defined]
    return cost
