"""A plan's one row for the step kernel, and its lines: :func:`kernel_row` turns the collectives ``plan`` priced
(each ``parallel/*_ops`` :class:`~commcost.parallel.layout.CommOp` through the CommModel) into the terms of
:mod:`commcost.analyses.plan.kernel`, which ``plan`` runs with ``xp = SCALAR``; :func:`explain` words the
kernel's per-term exposures as the ``comm[]`` lines (:class:`~commcost.analyses.plan.plan_dp.CommLine`). Nothing
here prices a step: the lines share out the numbers the step was summed from.

``inp`` is :class:`~commcost.analyses.plan.plan.PlanInputs` (not imported: plan imports this module).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import commcost.analyses.plan.compose as K
from commcost.analyses.plan.kernel import Buckets, CommTerms, Compute, Row, StepColumns
from commcost.analyses.plan.plan_dp import CommLine, _advice_inputs, _gradient_cost, plan_stack
from commcost.comm.collectives import Collective
from commcost.core.xp import SCALAR
from commcost.hardware.registry import gpu_row
from commcost.parallel.dispatch import comm_sm_share
from commcost.parallel.layout import layer_passes, layout_group, leaves_node, stage_layers
from commcost.parallel.zero import zero3_units
from commcost.step.bucket_schedule import uniform_buckets
from commcost.step.ddp_buckets import ddp_bucket_caps
from commcost.step.losses import SYNC_BYTES
from commcost.step.timeline import TimelineInputs, caps_for, gradient_stream
from commcost.workload.memory import params_per_gpu

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.comm.model import CommModel

__all__ = ["DataParallelPrices", "kernel_row", "explain"]

NO_BUCKETS = Buckets(times_s=(0.0, 0.0, 0.0), full=0, not_ready=(0.0, 0.0, 0.0), wire_s=0.0)
"""A row without a bucket timeline (ZeRO-3, or no gradient to reduce): every term 0."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DataParallelPrices:
    """ZeRO-0/1/2's priced collectives of one plan: the gradient reductions with their shares of the bucket stream,
    the weight gathers with their NIC share, and the bucket cost ``T(c) = sum_i k_i T(op, c f_i, P_i, r_i)``."""

    reductions: tuple = ()
    """``((op, f, T, algorithm), ...)``: each group's reduction and its share ``f`` of the gradient bytes."""
    gathers: tuple = ()
    """``((op, k, T, algorithm), ...)``: each weight all-gather and ``k`` (:func:`commcost.analyses.plan.compose.nic_share`)."""
    total_bytes: float = 0.0
    """The gradient bytes reduced."""
    cost: object = None
    """``T(c)`` of a bucket of ``c`` bytes over every group (None without reductions)."""


def _dp_prices(inp, model: CommModel, dp_ops, crossing: int) -> DataParallelPrices:
    """:class:`DataParallelPrices` of ZeRO-0/1/2's ``dp_ops`` (``(op, T, algorithm)``)."""
    reduce_op = Collective.ALL_REDUCE if inp.layout.zero == 0 else Collective.REDUCE_SCATTER
    grads = [(o, T, a) for o, T, a in dp_ops if o.op is reduce_op]
    gathers = tuple((o, K.nic_share(SCALAR, crossing=crossing, ranks_per_node=o.ranks_per_node, group=o.group_size),
                     T, a) for o, T, a in dp_ops if o.op is Collective.ALL_GATHER)
    total = sum(o.size_bytes for o, _, _ in grads)
    if not grads or total <= 0:
        return DataParallelPrices(gathers=gathers)
    shares = [(o, o.size_bytes / total) for o, _, _ in grads]
    share_nic = [K.nic_share(SCALAR, crossing=crossing, ranks_per_node=o.ranks_per_node, group=o.group_size)
                 for o, _ in shares]

    cost = _gradient_cost(model, shares, share_nic)
    return DataParallelPrices(reductions=tuple((o, f, T, a) for (o, f), (_, T, a) in zip(shares, grads)),
                              gathers=gathers, total_bytes=total, cost=cost)


def _timeline(inp, dpp: DataParallelPrices, *, model: CommModel, micro_batch_s: float, compute_mb_s: float,
              forward_share: float) -> TimelineInputs:
    """The DDP timeline of the plan's gradients (what the bucket advice judges; its stream is the kernel's)."""
    L = inp.layout
    q = inp.grad_bytes
    t_mb = micro_batch_s
    return TimelineInputs(gpus=max(o.group_size for o, _, _, _ in dpp.reductions), comm=model, step_s=t_mb,
                          params=dpp.total_bytes / q, bytes_per_grad=int(q) if float(q).is_integer() else 2,
                          backward_fraction=K.dp_backward_fraction(fwd_share=forward_share, compute_mb_s=compute_mb_s,
                                                                   micro_batch_s=t_mb) if t_mb > 0 else 2 / 3,
                          grad_accum=K.dp_accumulated_micro_batches(SCALAR, pp=L.pp, micro_batches=L.micro_batches))


def _buckets(inp, dpp: DataParallelPrices, st) -> Buckets:
    """The bucket timeline's terms of the plan's gradients on the uniform stream (:func:`uniform_buckets`); ``st`` the
    plan's stack (:func:`~commcost.analyses.plan.plan_dp.plan_stack`)."""
    gathers = tuple(k * T for _, k, T, _ in dpp.gathers)
    if dpp.cost is None:
        return replace(NO_BUCKETS, gathers_s=gathers)
    q = inp.grad_bytes
    bpg = int(q) if float(q).is_integer() else 2
    # the timeline's stream: N = S / q gradients of bpg bytes each (TimelineInputs.message_bytes)
    probe = TimelineInputs(gpus=2, comm=None, step_s=1.0, params=dpp.total_bytes / q, bytes_per_grad=bpg)
    caps = ddp_bucket_caps(None) if inp.bucket_cap_bytes is None else caps_for(inp.bucket_cap_bytes)
    _, times, m, not_ready, wire = uniform_buckets(gradient_stream(probe).total_bytes, caps, dpp.cost)
    L = inp.layout
    each = L.zero == 2 and L.micro_batches > 1 and st.zero2_scatter_per_micro_batch
    return Buckets(times_s=times, full=m, not_ready=not_ready, wire_s=wire,
                   whole_s=dpp.cost(dpp.total_bytes) if each else 0.0, zero2_each=each, gathers_s=gathers)


def kernel_row(inp, model: CommModel, priced, compute: Compute) -> tuple[Row, DataParallelPrices]:
    """The kernel's :class:`~commcost.analyses.plan.kernel.Row` of the plan ``inp`` from its ``priced`` collectives
    (``(op, T, algorithm)`` in ``collective_ops`` order) and ``compute``, with ZeRO-0/1/2's prices for the lines."""
    spec, L, G = inp.spec, inp.layout, inp.gpus_per_node
    m, per_stage = L.micro_batches, stage_layers(spec.layers, L)
    st = plan_stack(inp)
    by: dict[str, list] = {"tp": [], "cp": [], "ep": [], "pp": [], "dp": []}
    for x in priced:
        by[x[0].dimension].append(x)
    z3 = L.zero == 3
    g = st.zero3_gathers_per_layer
    dp_ops = by["dp"]
    crossing = sum(leaves_node(*layout_group(L, dim, G)) for dim in ("tp", "cp", "ep"))
    dpp = DataParallelPrices() if z3 else _dp_prices(inp, model, dp_ops, crossing)
    terms = CommTerms(
        micro_batches=m, pp=L.pp, vp=L.vp, cp=L.cp, passes=layer_passes(SCALAR, L.recompute == "full"),
        tp=tuple((o.count_per_step, T, o.op is Collective.ALL_GATHER) for o, T, _ in by["tp"]),
        tp_overlap=inp.tp_comm_overlap,
        cp_rings=tuple((o.count_per_step / (L.cp - 1), T) for o, T, _ in by["cp"]),
        ep=tuple((o.count_per_step, T) for o, T, _ in by["ep"]),
        ep_pairs=m * spec.moe_layer_count / spec.layers * per_stage, moe_overlap=inp.moe_overlap,
        sm_share=comm_sm_share(inp.gpu), pp_sends=tuple(T for _, T, _ in by["pp"]), zero3=z3,
        zero3_gather_s=g * sum(T for o, T, _ in dp_ops if o.op is Collective.ALL_GATHER) if z3 else 0.0,
        zero3_scatter_s=sum(T for o, T, _ in dp_ops if o.op is not Collective.ALL_GATHER) if z3 else 0.0,
        zero3_units=zero3_units(per_stage), zero3_unshard_under_pp=st.zero3_unshard_under_pp,
        zero3_gather_host_sync=st.zero3_gather_host_sync)
    dense, expert = params_per_gpu(spec, L)
    W = L.world
    sync_one = model.cost(Collective.ALL_REDUCE, SYNC_BYTES, W, ranks_per_node=min(G, W)).total_s if W > 1 else 0.0
    row = Row(compute=compute, comm=terms, buckets=NO_BUCKETS if z3 else _buckets(inp, dpp, st), dense_params=dense,
              expert_params=expert, dense_ranks=L.shard_dp, expert_ranks=L.expert_dp, zero=L.zero,
              hbm_bytes_per_s=gpu_row(inp.gpu)[1], world=W, sync_one_s=sync_one)
    return row, dpp


def explain(inp, model: CommModel, priced, row: Row, out: StepColumns, dpp: DataParallelPrices
            ) -> tuple[list[CommLine], tuple | None]:
    """``(lines, advice timeline)``: the plan's ``comm[]`` lines in ``priced``'s order (TP, CP, EP, PP, then
    data parallelism), each with the kernel's exposed seconds of its term (EP's shared by wire time; ZeRO-3's and
    the buckets' split as :func:`_zero3_lines` and :func:`_dp_lines` say), and the ``(TimelineInputs, cost)`` the
    bucket advice judges (None without a bucket timeline)."""
    crit = out.critical
    at = {"tp": iter(crit.tp), "cp": iter(crit.cp), "pp": iter(crit.pp)}
    lines: list[CommLine] = []
    dp_ops = []
    for op, T, alg in priced:
        n, dim = op.count_per_step, op.dimension
        if dim == "dp":
            dp_ops.append((op, T, alg))
            continue
        if dim == "ep":    # the EP lines share the exposed time by their wire time
            exposed = crit.ep_s * (n * T / crit.ep_wire_s) if crit.ep_wire_s > 0 else 0.0
        else:
            exposed = next(at[dim])
        lines.append(CommLine(comm=op, one_s=T, algorithm=alg, time_s=n * T, exposed_s=exposed))
    if inp.layout.zero == 3:
        return lines + _zero3_lines(dp_ops, crit, units=row.comm.zero3_units,
                                    gathers=plan_stack(inp).zero3_gathers_per_layer), None
    advice = None
    if dpp.cost is not None:
        advice = (_advice_inputs(inp, _timeline(inp, dpp, model=model, micro_batch_s=out.micro_batch_s,
                                                compute_mb_s=row.compute.compute_mb_s,
                                                forward_share=row.compute.forward_share), dpp.total_bytes), dpp.cost)
    return lines + _dp_lines(inp, dpp, row.buckets, out.data_parallel), advice


def _zero3_lines(dp_ops, crit, *, units, gathers: int) -> list[CommLine]:
    """ZeRO-3's gather and scatter lines (:func:`commcost.analyses.plan.compose.zero3_exposed_s`, ``u = units``): the
    forward's exposed part to the gathers, the backward's split between gather and scatter by their times in it, the
    step's first gather to the gathers; a layer's gather is ``g`` all-gathers (``gathers``) one after another."""
    T_ag, T_rs = crit.zero3_gather_s, crit.zero3_scatter_s
    fwd, bwd, rounds = crit.zero3_fwd_s, crit.zero3_bwd_s, crit.zero3_rounds
    T_ag_b = crit.zero3_regather * T_ag                     # the gather's part of the backward
    b_ag = T_ag_b / (T_ag_b + T_rs) if T_ag_b + T_rs else 0.0
    ag = [x for x in dp_ops if x[0].op is Collective.ALL_GATHER]
    rs = [x for x in dp_ops if x[0].op is not Collective.ALL_GATHER]
    return [CommLine(comm=o, one_s=T, algorithm=a, time_s=o.count_per_step * T,
                     exposed_s=(gathers * T / T_ag if T_ag else 0.0) * (rounds * units * (fwd + bwd * b_ag) + T_ag))
            for o, T, a in ag] + \
        [CommLine(comm=o, one_s=T, algorithm=a, time_s=o.count_per_step * T,
                  exposed_s=(T / T_rs if T_rs else 0.0) * rounds * units * bwd * (1.0 - b_ag)) for o, T, a in rs]


def _dp_lines(inp, dpp: DataParallelPrices, b: Buckets, dp) -> list[CommLine]:
    """ZeRO-0/1/2's lines: each group's reduction its share ``f`` of the bucket timeline's wire and exposed seconds,
    ZeRO-2's earlier micro-batches' reduce-scatters (where the stack runs them), each weight gather."""
    out: list[CommLine] = []
    for o, f, T, a in dpp.reductions:
        out.append(CommLine(comm=o, one_s=T, algorithm=a, time_s=dp.buckets_wire_s * f, exposed_s=dp.buckets_s * f))
    if b.zero2_each:
        extra = inp.layout.micro_batches - 1
        for o, f, _, a in dpp.reductions:
            each = replace(o, count_per_step=float(extra), what="ZeRO-2: each earlier micro-batch's gradients "
                           "to their shards (sharded gradients do not accumulate locally)")
            out.append(CommLine(comm=each, one_s=b.whole_s * f, algorithm=a, time_s=extra * b.whole_s * f,
                                exposed_s=dp.zero2_s * f))
    for (o, k, T, a), exposed in zip(dpp.gathers, dp.gathers):
        out.append(CommLine(comm=o, one_s=k * T, algorithm=a, time_s=k * T, exposed_s=exposed))
    return out
