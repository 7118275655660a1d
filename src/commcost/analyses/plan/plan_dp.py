"""A plan's communication lines (:class:`CommLine`, the ``comm[]`` rows) and those of data parallelism: the gradient
reduction through the DDP bucket timeline, ZeRO-1/2's weight all-gather, ZeRO-3's per-layer gathers and scatters
(module docstring of :mod:`commcost.analyses.plan.plan`, items 3 and 4), and the stack a plan runs
(:func:`plan_stack`). :mod:`commcost.analyses.plan.plan` re-exports :class:`CommLine` and :func:`plan_stack`; ``inp`` is
its :class:`~commcost.analyses.plan.plan.PlanInputs` (not imported: plan imports this module)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import commcost.analyses.plan.compose as K
from commcost.comm.collectives import Collective
from commcost.core.xp import SCALAR
from commcost.parallel.layout import CommOp
from commcost.step.ddp_buckets import ddp_bucket_caps
from commcost.step.timeline import TimelineInputs, caps_for, evaluate_caps
from commcost.workload.shape import MAX_LAYERS, fits_timeline, model_params
from commcost.workload.stacks import auto_kind, auto_runs_implied, resolve_stack, stack

TYPE_CHECKING = False
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
    kind = auto_kind(L.zero, L.tp, L.pp) if inp.stack == "auto" and auto_runs_implied(L) else None
    return stack(resolve_stack(inp.stack, L)[0], compiled=inp.compiled, auto_kind=kind)


def _zero3_lines(dp_ops, *, m: int, units: float, t_layer_f: float, gathers: int = 1,
                 once: bool = False) -> tuple[float, list[CommLine]]:
    """ZeRO-3's per-layer gathers and scatters behind the neighbouring layer's compute
    (:func:`commcost.analyses.plan.compose.zero3_exposed_s`): ``(critical seconds per micro-batch, lines)``, the
    backward's exposed part split between gather and scatter by their times; a layer's gather is
    ``g`` all-gathers (``gathers``) one after another; ``once``: the stage stays gathered through the
    step (one round of gathers and scatters, no re-gather in the backward)."""

    ag = [(o, T, a) for o, T, a in dp_ops if o.op is Collective.ALL_GATHER]
    rs = [(o, T, a) for o, T, a in dp_ops if o.op in (Collective.REDUCE_SCATTER, Collective.ALL_REDUCE)]
    T_ag, T_rs = gathers * sum(T for _, T, _ in ag), sum(T for _, T, _ in rs)
    regather, rounds = K.zero3_regather_rounds(SCALAR, once=once, micro_batches=m)
    fwd, bwd = K.zero3_layer_exposed_s(SCALAR, gather_s=T_ag, scatter_s=T_rs, layer_fwd_s=t_layer_f,
                                       regather=regather)
    critical_mb, _ = K.zero3_exposed_s(fwd_s=fwd, bwd_s=bwd, units=units, micro_batches=m, gather_s=T_ag,
                                       rounds=rounds)
    T_ag_b = regather * T_ag                     # the gather's part of the backward
    b_ag = T_ag_b / (T_ag_b + T_rs) if T_ag_b + T_rs else 0.0
    lines = []
    for o, T, a in ag:
        share = gathers * T / T_ag if T_ag else 0.0
        lines.append(CommLine(comm=o, one_s=T, algorithm=a, time_s=o.count_per_step * T,
                              exposed_s=share * (rounds * units * (fwd + bwd * b_ag) + T_ag)))
    for o, T, a in rs:
        share = T / T_rs if T_rs else 0.0
        lines.append(CommLine(comm=o, one_s=T, algorithm=a, time_s=o.count_per_step * T,
                              exposed_s=share * rounds * units * bwd * (1.0 - b_ag)))
    return critical_mb, lines


def _scatters_per_micro_batch(inp) -> bool:
    """Whether the plan's stack reduce-scatters ZeRO-2 gradients every micro-batch
    (:attr:`commcost.workload.stacks.Stack.zero2_scatter_per_micro_batch`)."""
    return plan_stack(inp).zero2_scatter_per_micro_batch


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


def _data_parallel_lines(inp, model: CommModel, dp_ops, *, t_mb: float, t_c: float, t_fwd: float,
                         fwd_share: float, crossing: int, advice: list | None = None) -> list[CommLine]:
    """Gradient reduction through the DDP timeline; ZeRO-1/2's weight all-gather against the next forward."""

    L = inp.layout
    reduce_op = Collective.ALL_REDUCE if L.zero == 0 else Collective.REDUCE_SCATTER
    grads = [(o, T, a) for o, T, a in dp_ops if o.op is reduce_op]
    gathers = [(o, T, a) for o, T, a in dp_ops if o.op is Collective.ALL_GATHER]
    total = sum(o.size_bytes for o, _, _ in grads)
    out: list[CommLine] = []
    if grads and total > 0:
        shares = [(o, o.size_bytes / total) for o, _, _ in grads]
        share_nic = [K.nic_share(SCALAR, crossing=crossing, ranks_per_node=o.ranks_per_node, group=o.group_size)
                     for o, _ in shares]

        cost = _gradient_cost(model, shares, share_nic)

        caps = ddp_bucket_caps(None) if inp.bucket_cap_bytes is None else caps_for(inp.bucket_cap_bytes)
        tl_inp = TimelineInputs(gpus=max(o.group_size for o, _ in shares), comm=model,
                                step_s=t_mb, params=total / inp.grad_bytes,
                                bytes_per_grad=int(inp.grad_bytes) if float(inp.grad_bytes).is_integer() else 2,
                                backward_fraction=K.dp_backward_fraction(fwd_share=fwd_share, compute_mb_s=t_c,
                                                                         micro_batch_s=t_mb) if t_mb > 0 else 2 / 3,
                                grad_accum=K.dp_accumulated_micro_batches(SCALAR, pp=L.pp, micro_batches=L.micro_batches))
        # the timeline's own evaluation (what exposed_at returns; O(1) for this uniform stream), with T_w
        _, wire, exposed, _ = evaluate_caps(tl_inp, caps, allreduce_s=cost)
        if advice is not None:  # kept for the one bucket advice (Plan.bucket_advice)
            advice.append((_advice_inputs(inp, tl_inp, total), cost))
        for (o, f), (_, T, a) in zip(shares, grads):
            out.append(CommLine(comm=o, one_s=T, algorithm=a, time_s=wire * f, exposed_s=exposed * f))
        extra = L.micro_batches - 1
        if L.zero == 2 and extra > 0 and _scatters_per_micro_batch(inp):
            # sharded gradients cannot accumulate locally: every earlier micro-batch reduce-scatters too
            W = tl_inp.backward_fraction * t_mb
            T_rs = cost(total)
            for (o, f), (_, _, a) in zip(shares, grads):
                each = replace(o, count_per_step=float(extra), what="ZeRO-2: each earlier micro-batch's gradients "
                               "to their shards (sharded gradients do not accumulate locally)")
                out.append(CommLine(comm=each, one_s=T_rs * f, algorithm=a, time_s=extra * T_rs * f,
                                    exposed_s=K.zero2_micro_batch_exposed_s(SCALAR, extra=extra, scatter_s=T_rs,
                                                                            window_s=W) * f))
    for o, T, a in gathers:
        k = K.nic_share(SCALAR, crossing=crossing, ranks_per_node=o.ranks_per_node, group=o.group_size)
        out.append(CommLine(comm=o, one_s=k * T, algorithm=a, time_s=k * T,
                            exposed_s=K.gather_exposed_s(SCALAR, gather_s=k * T, fwd_s=t_fwd)))
    return out
