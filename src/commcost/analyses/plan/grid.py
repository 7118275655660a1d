"""``plan``'s composition over a whole grid of configurations at once (numpy columns).

The step is not composed here: :func:`evaluate_grid` runs :mod:`commcost.analyses.plan.kernel`'s stages, the ones
``plan`` runs on its one row, with ``xp = numpy``; the compute calls the kernels ``plan`` calls
(:mod:`commcost.analyses.plan.compose`, :func:`commcost.workload.operators.micro_batch_operators`), and the memory comes
from :mod:`commcost.workload.memory`'s kernels (:mod:`commcost.analyses.plan.grid_memory`). The collectives to price
come from the array functions the ``parallel/*`` modules' ``*_ops`` call: message sizes and counts
(:mod:`commcost.parallel.tensor`, :mod:`~commcost.parallel.context`, :mod:`~commcost.parallel.expert`,
:mod:`~commcost.parallel.pipeline`, :mod:`~commcost.parallel.zero`, :mod:`~commcost.parallel.dispatch`) and placement
(:func:`commcost.parallel.layout.group_of` under the search's rank order, ``--order``).
``tests/analyses/plan/test_search_equals_plan.py`` checks that every configuration of several spaces
(dense, MoE, CP, ZeRO-3, uneven pipelines, bucket caps, TP overlap) gets ``plan``'s step and memory to
1e-9 relative.

**Pricing.** Every collective goes through the one CommModel, once per distinct
``(op, size, group, ranks per node)`` (:class:`~commcost.analyses.plan.grid_distinct.Pricer`): a grid of
a million configurations holds a few thousand distinct collectives, and the prices are broadcast back by index. They are
priced as arrays, one :meth:`~commcost.comm.model.CommModel.cost_many` call per distinct
``(op, group, ranks per node)`` with every size it carries.
"""

from __future__ import annotations

from commcost.comm.collectives import Collective
from commcost.analyses.plan.compose import nic_share
from commcost.analyses.plan.kernel import Buckets, CommTerms, Compute, Critical, DataParallel
from commcost.analyses.plan.kernel import critical, data_parallel, finish
from commcost.analyses.plan.grid_memory import offloaded_bytes
from commcost.analyses.plan.grid_memory import rate_masks
from commcost.analyses.plan.grid_memory import stack_column
from commcost.analyses.plan.grid_memory import tp_overlap_column
from commcost.analyses.plan.grid_buckets import BucketRows, variant_prices
from commcost.analyses.plan.grid_distinct import Pricer
from commcost.analyses.plan.grid_distinct import distinct_keys
from commcost.analyses.plan.grid_distinct import needed
from commcost.analyses.plan.grid_distinct import unique_rows
from commcost.analyses.plan.space import RECOMPUTE
from commcost.analyses.plan.space import Choices
from commcost.hardware.registry import gpu_row
from commcost.parallel.context import cp_message_bytes
from commcost.parallel.context import cp_rings_per_step
from commcost.parallel.dispatch import FP8_DISPATCH_BYTES
from commcost.parallel.dispatch import a2a_part_columns
from commcost.parallel.dispatch import comm_sm_share
from commcost.parallel.expert import dispatch_elements
from commcost.parallel.expert import expert_counts_per_step
from commcost.parallel.expert import expert_tp_gather_bytes
from commcost.parallel.expert import expert_tp_gathers
from commcost.parallel.expert import moe_layers_per_stage
from commcost.parallel.layout import DEFAULT_ORDER
from commcost.parallel.layout import group_of
from commcost.parallel.layout import heaviest_stage_layers
from commcost.parallel.layout import layer_passes
from commcost.parallel.layout import leaves_node
from commcost.parallel.layout import pair_ranks
from commcost.parallel.pipeline import pp_message_bytes
from commcost.parallel.tensor import regather_passes
from commcost.parallel.tensor import tp_gather_count
from commcost.parallel.tensor import tp_count_per_step
from commcost.parallel.tensor import tp_message_bytes
from commcost.parallel.zero import zero3_gather_bytes
from commcost.parallel.zero import zero3_scatter_bytes
from commcost.parallel.zero import zero3_units
from commcost.step.losses import LOSS_NAMES, SYNC_BYTES
from commcost.workload.compute import elementwise_layer_bytes_per_token
from commcost.workload.compute import elementwise_time_s
from commcost.workload.compute import peak_flops_per_s
from commcost.workload.memory import WEIGHT_BYTES
from commcost.workload.memory import stage_params
from commcost.workload.offload import host_link_bytes_per_s
from commcost.workload.offload import offload_exposed_s
from commcost.workload.operators import kernel_rates
from commcost.workload.operators import micro_batch_operators
from commcost.workload.stacks import stack
import commcost.analyses.plan.compose as K

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.analyses.plan.search_inputs import SearchInputs
    from commcost.analyses.plan.space import GridColumns

__all__ = ["Pricer", "structure", "needed", "price_base", "evaluate_grid", "distinct_keys"]



def structure(base: dict, spec, G: int, order: str = DEFAULT_ORDER) -> dict:
    """Per structural row: stage layers, placement, parameters per GPU and shard groups (all that does
    not depend on SP, recomputation, ZeRO or the bucket cap)."""
    import numpy as np


    t, p, c, e, d = (base[k] for k in ("t", "p", "c", "e", "d"))
    per_stage = heaviest_stage_layers(np, spec.layers, p, base["v"])
    expert_tp = base["etp"]

    def group(dim):
        """``(size, ranks per node)`` of every row's ``dim`` group under the rank order ``order``."""
        return group_of(np, dim, order=order, tp=t, cp=c, dp=d, pp=p, ep=e, expert_tp=expert_tp,
                        gpus_per_node=G)

    (_, tp_rpn), (_, cp_rpn), (_, ep_rpn) = group("tp"), group("cp"), group("ep")
    crossing = leaves_node(t, tp_rpn).astype(float) + leaves_node(c, cp_rpn) + leaves_node(e, ep_rpn)
    dense, expert = stage_params(np, spec, layers_held=per_stage, pp=p, tp=t, ep=e, expert_tp=expert_tp)
    D, D_rpn = group("dp")                                      # d c: dense shard group
    E_dp, E_rpn = group("edp")                                  # expert-data-parallel group
    return dict(per_stage=per_stage, expert_tp=expert_tp, tp_rpn=tp_rpn, ep_rpn=ep_rpn, crossing=crossing,
                etp_rpn=group("etp")[1], cp_pair=pair_ranks(np, c, cp_rpn), pp_pair=pair_ranks(np, *group("pp")),
                dense=dense, expert=expert, D=D, D_rpn=D_rpn, E_dp=E_dp, E_rpn=E_rpn)


def price_base(base: dict, X: dict, inp: SearchInputs, pricer: Pricer, caps: tuple[int, ...],
               need: dict | None = None) -> dict:
    """Every collective's price per structural row (each distinct one through the CommModel once), and
    the bucket timeline's constants per (ZeRO-0 or 1/2, cap) variant: ``bucket_base, bucket_coef``
    (candidates ``E_j = A_j - (1 - F_j/S) W``), ``bucket_wire`` (``T_w``) and ``bucket_gather`` (ZeRO-1/2's
    ``k T_ag`` per group); ``X`` is :func:`structure` of ``base``, returned with the prices added.
    ``need`` (:func:`needed`) limits the pricing to what the configurations that fit use: ``sp0``, ``sp1``,
    ``z3`` per structural row and ``variant`` per row and timeline variant (others stay 0)."""
    import numpy as np


    spec, s = inp.space.spec, inp.space.seq
    q, q_g = inp.activation_bytes, inp.grad_bytes
    X = dict(X)
    t, p, c, e, b = (base[k].astype(float) for k in ("t", "p", "c", "e", "b"))
    ti, ci, ei, pi = base["t"], base["c"], base["e"], base["p"]
    nb = len(t)
    zeros = np.zeros(nb)
    every = np.ones(nb, dtype=bool)
    need = need or {"sp0": every, "sp1": every, "z3": every, "variant": np.ones((nb, 2 * len(caps)), dtype=bool)}

    def col(op, size, group, rpn, on):
        T = zeros.copy()
        if on.any():
            T[on] = pricer.column(op, np.broadcast_to(size, (nb,))[on], np.broadcast_to(group, (nb,))[on],
                                  np.broadcast_to(rpn, (nb,))[on])
        return T

    S_tp = tp_message_bytes(micro_batch=b, seq=s, cp=c, hidden=spec.hidden, activation_bytes=q)
    for op, name, used in ((Collective.ALL_REDUCE, "T_tp_ar", need["sp0"]), (Collective.ALL_GATHER, "T_tp_ag", need["sp1"]),
                           (Collective.REDUCE_SCATTER, "T_tp_rs", need["sp1"])):
        X[name] = col(op, S_tp, ti, X["tp_rpn"], (ti > 1) & used)
    X["T_cp"] = col(Collective.SEND_RECV, cp_message_bytes(np, micro_batch=b, seq=s, cp=c, tp=t, kv_heads=spec.n_kv,
                                                           head_dim=spec.d, activation_bytes=q),
                    2, X["cp_pair"], ci > 1)
    ep_on = (ei > 1) & (spec.moe_layer_count > 0)                 # the expert collectives, without and with SP
    q_d = FP8_DISPATCH_BYTES if inp.fp8_dispatch else q            # plan.dispatch_bytes
    te, moe = base["etp"], spec.moe_layer_count > 0
    for flag, used in ((0, need["sp0"]), (1, need["sp1"])):
        per_element = dispatch_elements(np, micro_batch=b, seq=s, cp=c, tp=t, sequence_parallel=bool(flag),
                                        top_k=spec.top_k, hidden=spec.hidden, expert_load=inp.expert_load)
        for name, q_x in (("d", q_d), ("c", q)):
            X[f"T_ep{name}{flag}"] = _a2a_column(col, inp, per_element * q_x, ei, X["ep_rpn"], ep_on & used)
        gathers = expert_tp_gathers(expert_tp=te, tp=ti, sequence_parallel=bool(flag))
        S = per_element * q
        gS = expert_tp_gather_bytes(np, size_bytes=S, expert_tp=te, tp=t, sequence_parallel=bool(flag))
        etp_on = (te > 1) & moe & used
        X[f"T_etp{flag}"] = (col(Collective.ALL_GATHER, gS, te, X["etp_rpn"], etp_on & gathers)
                             + col(Collective.REDUCE_SCATTER, gS, te, X["etp_rpn"], etp_on & gathers)
                             + col(Collective.ALL_REDUCE, S, te, X["etp_rpn"], etp_on & ~gathers))
    X["T_pp"] = col(Collective.SEND_RECV, pp_message_bytes(micro_batch=b, seq=s, cp=c, hidden=spec.hidden,
                                                           activation_bytes=q, tp=t), 2, X["pp_pair"], pi > 1)
    groups = [(X["dense"], X["D"], X["D_rpn"])] + ([(X["expert"], X["E_dp"], X["E_rpn"])] if spec.is_moe else [])
    X["T3_ag"], X["T3_rs"] = _zero3_columns(col, groups, X, base, inp, need["z3"])
    X.update(_bucket_tables(groups, X["crossing"], caps, pricer, need["variant"], grad_bytes=q_g))
    world = (t * p * c * base["d"]).astype(int)       # kernel.finish: the gradient norm's all-reduce over the job
    X["T_sync"] = col(Collective.ALL_REDUCE, SYNC_BYTES, world, np.minimum(inp.space.gpus_per_node, world), world > 1)
    X["operator_group"] = _operator_groups(base, X["per_stage"])
    return X


def _operator_groups(base: dict, per_stage) -> tuple:
    """``(group of each structural row, a row of each group)``: rows with the same inputs to
    :func:`commcost.workload.operators.micro_batch_operators` (``t, c, e, b, m``, expert TP, layers on the
    stage) are one group; their operators, element-wise functions of those inputs, are computed once
    (rows that differ only in DP, the virtual stages or the pipeline's split: ~40% of a MoE grid's)."""
    import numpy as np

    _, group = unique_rows(np.stack([base[k].astype(float) for k in ("t", "c", "e", "b", "m", "etp")]
                                    + [np.asarray(per_stage, dtype=float)], axis=1))
    first = np.zeros(int(group.max()) + 1 if len(group) else 0, dtype=np.int64)
    first[group] = np.arange(len(group))                          # a row of each group (any: same inputs)
    return group, first


def _zero3_columns(col, groups, X: dict, base: dict, inp: SearchInputs, on_rows) -> tuple:
    """``(T3_ag, T3_rs)`` of :func:`price_base`: ZeRO-3's gather and scatter per unit, summed over the shard
    ``groups`` (``col`` prices a column; ``on_rows``: the structural rows that use ZeRO-3)."""
    import numpy as np

    nb, q_g = len(base["t"]), inp.grad_bytes
    zeros = np.zeros(nb)
    units = zero3_units(X["per_stage"])
    # a layer's gathers, one after another (1 under auto: fsdp and megatron gather per layer)
    g = stack_column(Choices.every_row(nb, zero=3), base, inp, "zero3_gathers_per_layer")
    X["T3_ag"], X["T3_rs"] = zeros.copy(), zeros.copy()
    for params, P, rpn in groups:
        on = (P > 1) & (params > 0) & on_rows
        X["T3_ag"] += g * col(Collective.ALL_GATHER, zero3_gather_bytes(params=params, units=units,
                                                                        weight_bytes=WEIGHT_BYTES, gathers_per_layer=g),
                              P, rpn, on)
        X["T3_rs"] += col(Collective.REDUCE_SCATTER, zero3_scatter_bytes(params=params, units=units, grad_bytes=q_g),
                          P, rpn, on)
    return X["T3_ag"], X["T3_rs"]


def _a2a_column(col, inp: SearchInputs, size, group, rpn, on):
    """:func:`commcost.parallel.dispatch.a2a_one_s` on columns: the slowest of the parts of
    :func:`commcost.parallel.dispatch.a2a_part_columns` that run (each distinct one priced once)."""
    import numpy as np

    spec = inp.space.spec
    out = 0.0
    for S, P, r, runs in a2a_part_columns(np, inp.a2a, size_bytes=size, group=group, ranks_per_node=rpn,
                                          experts=spec.experts, top_k=spec.top_k):
        out = np.maximum(out, col(Collective.ALL_TO_ALL, S, P, r, on & runs))
    return out


def _bucket_tables(groups, crossing, caps, pricer: Pricer, need_variant, *, grad_bytes: float) -> dict:
    """The prices behind plan's data-parallel lines (:mod:`commcost.analyses.plan.explain`) per structural row and variant ``2 x len(caps)``
    (ZeRO-0 all-reduce or ZeRO-1/2 reduce-scatter, then the cap): what the timeline's closed form
    (:func:`commcost.step.timeline.uniform_end_s`) needs, from :func:`~commcost.step.timeline.uniform_buckets`
    (``bucket_times`` ``T(c_1), T(c), T(last)``, ``bucket_full`` ``m``, ``bucket_not_ready`` ``f_j``,
    ``bucket_wire`` ``T_w``; all 0 where no group reduces), and ZeRO-1/2's gathers ``k T_ag``
    (``bucket_gather``); ``k`` is :func:`commcost.analyses.plan.compose.nic_share`."""
    import numpy as np

    q_g = grad_bytes
    ng, nb, nv = len(groups), len(crossing), 2 * len(caps)
    sizes = np.stack([g[0] * q_g for g in groups], axis=1)
    P = np.stack([g[1] for g in groups], axis=1)
    rpn = np.stack([g[2] for g in groups], axis=1)
    active = (P > 1) & (sizes > 0)
    k = nic_share(np, crossing=crossing[:, None], ranks_per_node=rpn, group=P)
    keys = np.concatenate([np.where(active, sizes, 0.0), np.where(active, P, 0), np.where(active, rpn, 0),
                           np.where(active, k, 0.0)], axis=1)
    uniq, inv = unique_rows(keys)
    nu = len(uniq)
    used = np.zeros((nu, nv), dtype=bool)
    np.logical_or.at(used, inv, need_variant)
    times = np.zeros((nv, nu, 3))
    full = np.zeros((nv, nu))
    not_ready = np.zeros((nv, nu, 3))
    wire = np.zeros((nv, nu))
    whole = np.zeros((nv, nu))
    gather = np.zeros((nv, nu, ng))
    S_g, P_g, r_g, k_g = uniq[:, :ng], uniq[:, ng:2 * ng].astype(int), uniq[:, 2 * ng:3 * ng].astype(int), uniq[:, 3 * ng:]
    on = P_g > 1                                      # the groups that reduce, per distinct row
    any_on = on.any(axis=1)
    total = np.zeros(nu)                              # plan: the gradient bytes of every group, summed in order
    for i in range(ng):
        total = total + np.where(on[:, i], S_g[:, i], 0.0)
    share = S_g / np.where(any_on, total, 1.0)[:, None]
    S_all = total / q_g * q_g
    group = np.where(on, P_g, 1)
    rows = BucketRows(used=used, any_on=any_on, total_bytes=S_all, share=share, group=group, ranks_per_node=r_g,
                      nic=k_g, on=on, group_bytes=S_g, times=times, full=full, not_ready=not_ready, wire=wire,
                      whole=whole, gather=gather)
    for sharded in (0, 1):
        variant_prices(sharded, rows, caps, pricer, grad_bytes=q_g)
    del nb
    # per component a flat column over (variant, distinct row): _bucket_exposed takes its rows with one 1-D
    # take at ``variant * nu + bucket_row`` (a 2-D fancy index over (variant, row) is ~5x slower)
    flat = {"full": full, "wire": wire, "whole": whole}
    for name, table in (("times", times), ("not_ready", not_ready), ("gather", gather)):
        for j in range(table.shape[2]):
            flat[f"{name}{j}"] = table[:, :, j]
    return dict(bucket_row=inv, bucket_distinct=nu, bucket_variants=nv, bucket_groups=ng,
                bucket_flat={name: col.ravel().copy() for name, col in flat.items()})


def _operator_columns(inp: SearchInputs, base: dict, cols: Choices, *, per_stage_base, groups):
    """``(t_c, t_fwd, t_f, t_attention, partners)`` of every row (``partners``: the TP collectives' partner
    GEMMs, ``OperatorTimes.tp_partners_s``): :func:`commcost.workload.operators.micro_batch_operators`
    on columns, as :func:`commcost.analyses.plan.plan.operator_times` on one row; under ``--stack auto`` each row
    takes the stack its layout implies (:func:`commcost.workload.stacks.resolve_stack`). The operators depend on
    the structural row, SP and recomputation only (not ZeRO or the bucket cap): each distinct
    ``(row, sp, recompute)`` of a stack is priced once and gathered back (``per_stage_base``: layers per row), a
    row standing for its operator group (``groups``: :func:`_operator_groups`)."""
    import numpy as np


    spec, s = inp.space.spec, inp.space.seq
    bi, sp, rc = cols.bi, cols.sp, cols.rc
    group, first = groups
    out = [np.zeros(len(bi)) for _ in range(12)]
    for (name, kind), mask in rate_masks(cols, base, inp).items():
        rows = np.nonzero(mask)[0]
        if not len(rows):
            continue
        key = (group.take(bi[rows]) * 2 + sp[rows]) * 3 + rc[rows]
        present = np.zeros(len(first) * 6, dtype=bool)
        present[key] = True
        ukey = np.nonzero(present)[0]
        pos = np.zeros(len(present), dtype=np.int64)
        pos[ukey] = np.arange(len(ukey))
        ub, usp, urc = first.take(ukey // 6), (ukey // 3) % 2, ukey % 3
        t, c, e, b, m = (base[k][ub].astype(float) for k in ("t", "c", "e", "b", "m"))
        st = stack(name, compiled=inp.compiled, auto_kind=kind)
        rates = kernel_rates(inp.gpu, inp.precision, st, fp8_attention=inp.fp8_attention,
                             flash=inp.flash_attention)
        o = micro_batch_operators(np, spec, st, rates, tokens=b * s / c, seq=s, layers=per_stage_base[ub], tp=t,
                                  sp=usp == 1, ep=e, expert_tp=base["etp"][ub].astype(float), full=urc == 2,
                                  selective=urc == 1, micro_batches=m, flash=inp.flash_attention,
                                  expert_load=inp.expert_load, a2a=inp.a2a, cp=c)
        back = pos.take(key)
        at = slice(None) if len(rows) == len(bi) else rows      # one stack prices every row: a plain copy
        for i, col in enumerate((o.compute_s, o.forward_s, o.layer_forward_s, o.attention_forward_s,
                                 *o.tp_partners_s)):
            col = np.asarray(col)
            out[i][at] = col.take(back) if col.ndim else col
    return (*out[:4], tuple(out[4:]))


def evaluate_grid(cols: GridColumns, base: dict, X: dict, inp: SearchInputs, *, breakdown: bool = True) -> dict:
    """Step and breakdown of every configuration in ``cols`` (:func:`commcost.analyses.plan.space.enumerate_space`)
    and the per-structural-row prices ``X`` of ``base`` (:func:`price_base`): :mod:`commcost.analyses.plan.kernel`'s
    stages, the ones ``plan`` runs on its one row, on numpy columns.

    Shared subexpressions once per distinct value: all but ZeRO-1/2's bucket timeline and the optimizer
    depend on ``(row, sp, recompute, ZeRO-3 or not)`` only (:func:`_per_key`: :func:`~commcost.analyses.plan.kernel.critical`),
    a tenth of the configurations; they are computed once per distinct key and gathered back (the same
    element operations on the same values, so the same floats).

    Returns arrays ``step_s`` and, with ``breakdown``, ``compute_s, pipeline_bubble_s, exposed_comm_s,
    optimizer_s, micro_batch_s``, ``exposed_<dim>_s`` for tp, cp, ep, pp, dp and the losses
    :data:`commcost.step.losses.LOSS_NAMES`.
    """
    import numpy as np

    bi, zero = cols.bi, cols.zero
    z3 = zero == 3
    keys, back = distinct_keys(cols, len(base["t"]), zero3_only=True)
    comp, crit = _per_key(keys, base, X, inp)
    nk = len(keys.bi)
    kz3 = keys.zero == 3                                  # a row's key is ZeRO-3 where the row is
    ex_dp = np.where(kz3, crit.zero3_s, 0.0).take(back)
    wire_dp = np.where(kz3, crit.zero3_wire_s, 0.0).take(back)    # the DP wire time, for the losses
    # 4. ZeRO-0/1/2: the bucket timeline over the last backward; ZeRO-1/2's weight gather behind the next forward
    low = np.nonzero(~z3)[0]
    if len(low):
        dp = _bucket_exposed(cols, base, X, inp, comp, crit, back, low)
        ex_dp[low], wire_dp[low] = dp.exposed_s, dp.wire_s
    world = (base["t"] * base["p"] * base["c"] * base["d"]).astype(float).take(bi)
    out = finish(np, compute_s=crit.compute_s.take(back), bubble_s=crit.bubble_s.take(back),
                 micro_batch_s=crit.micro_batch_s.take(back), exposed_tp_s=_col(crit.tp_s, nk).take(back),
                 exposed_cp_s=_col(crit.cp_s, nk).take(back), exposed_ep_s=_col(crit.ep_s, nk).take(back),
                 exposed_pp_s=_col(crit.pp_s, nk).take(back), exposed_dp_s=ex_dp,
                 dp_wire_s=wire_dp, dense_params=X["dense"].take(bi), expert_params=X["expert"].take(bi),
                 dense_ranks=X["D"].take(bi), expert_ranks=X["E_dp"].take(bi), zero=zero,
                 hbm_bytes_per_s=gpu_row(inp.gpu)[1], world=world, sm_share=comm_sm_share(inp.gpu),
                 sync_one_s=X["T_sync"].take(bi),
                 gather_wire_s=np.where(kz3, _col(crit.zero3_gather_wire_s, nk), 0.0).take(back),
                 host_sync=_col(crit.zero3_host_sync, nk).take(back))
    if not breakdown:
        return dict(step_s=out.step_s)
    return dict(step_s=out.step_s, compute_s=out.compute_s, pipeline_bubble_s=out.pipeline_bubble_s,
                exposed_comm_s=out.exposed_comm_s, optimizer_s=out.optimizer_s, micro_batch_s=out.micro_batch_s,
                exposed_tp_s=out.exposed_tp_s, exposed_cp_s=out.exposed_cp_s, exposed_ep_s=out.exposed_ep_s,
                exposed_pp_s=out.exposed_pp_s, exposed_dp_s=out.exposed_dp_s, **dict(zip(LOSS_NAMES, out.losses)))


def _col(x, n: int):
    """``x`` as a column of ``n`` (a kernel returns a float 0 for a term no row has), contiguous: a
    ``take`` from it is a plain 1-D gather."""
    import numpy as np

    x = np.asarray(x)
    return x if x.shape == (n,) else np.full(n, x)


def _bucket_exposed(cols: GridColumns, base: dict, X: dict, inp: SearchInputs, comp: Compute, crit: Critical, back,
                    low) -> DataParallel:
    """:func:`evaluate_grid`'s step 4 for the ZeRO-0/1/2 configurations ``low``:
    :func:`commcost.analyses.plan.kernel.data_parallel` on their bucket tables (``comp``, ``crit``: the compute and
    :func:`~commcost.analyses.plan.kernel.critical` of the keys, ``back``: each row's key)."""
    import numpy as np

    bi, zero = cols.bi, cols.zero
    bl, kl, zl = bi[low], back[low], zero[low]
    # each row's (variant, distinct bucket row) in bucket_flat's columns (_bucket_tables)
    flat = ((zl > 0) * (X["bucket_variants"] // 2) + cols.capi[low]) * X["bucket_distinct"] + X["bucket_row"][bl]
    tab = X["bucket_flat"]

    def take(name):
        return tab[name].take(flat)

    # the stack's, per row (stacks.json; under auto ZeRO-2 is megatron: none)
    per_mb = stack_column(Choices(bi=bl, sp=cols.sp[low], rc=cols.rc[low], zero=zl), base, inp,
                          "zero2_scatter_per_micro_batch")
    b = Buckets(times_s=tuple(take(f"times{j}") for j in range(3)), full=take("full"),
                not_ready=tuple(take(f"not_ready{j}") for j in range(3)), wire_s=take("wire"),
                whole_s=take("whole"), zero2_each=(zl == 2) & per_mb,
                gathers_s=tuple(take(f"gather{i}") for i in range(X["bucket_groups"])))
    return data_parallel(np, b, micro_batch_s=crit.micro_batch_s.take(kl), compute_mb_s=comp.compute_mb_s.take(kl),
                         forward_share=comp.forward_share.take(kl), forward_s=comp.forward_s.take(kl),
                         pp=base["p"].astype(float).take(bl), micro_batches=base["m"].astype(float).take(bl))


def _per_key(cols: Choices, base: dict, X: dict, inp: SearchInputs) -> tuple[Compute, Critical]:
    """Everything of :func:`evaluate_grid` that does not depend on ZeRO-1/2 or the bucket cap, on the
    columns ``cols`` of distinct ``(row, sp, recompute, ZeRO-3 or not)`` (``zero`` 3 or 0): the compute and
    :func:`commcost.analyses.plan.kernel.critical` of the prices ``X`` gathered per key."""
    import numpy as np

    spec = inp.space.spec
    bi = cols.bi
    p, v, c, m = (base[k].astype(float).take(bi) for k in ("p", "v", "c", "m"))
    sp, rc, zero = cols.sp, cols.rc, cols.zero
    per_stage = X["per_stage"].take(bi)
    full = rc == 2
    comp = _compute_columns(cols, base, X, inp)
    passes = layer_passes(np, full)
    moe_per_stage = moe_layers_per_stage(moe_layers=spec.moe_layer_count, layers=spec.layers,
                                         layers_per_stage=per_stage)
    count_tp = tp_count_per_step(micro_batches=m, layers_per_stage=per_stage, moe_layers_per_stage=moe_per_stage,
                                 shared_experts=spec.shared_experts, passes=passes)
    regather = regather_passes(np, selective=stack_column(cols, base, inp, "selective"),
                               recompute_selective=rc == 1)
    tp = ((count_tp, np.where(sp == 0, X["T_tp_ar"].take(bi), 0.0), False),
          (tp_gather_count(count=count_tp, passes=passes, regather_passes=regather),
           np.where(sp == 1, X["T_tp_ag"].take(bi), 0.0), True),
          (count_tp, np.where(sp == 1, X["T_tp_rs"].take(bi), 0.0), False))
    ep = ()
    if spec.moe_layer_count:                                       # dense: no expert all-to-all
        pairs = m * moe_per_stage                                  # MoE layer passes, as expert_ops counts them
        n_d, n_c, n_etp = expert_counts_per_step(pairs=pairs, passes=passes)
        ep = tuple((n, np.where(sp == 1, X[f"{name}1"].take(bi), X[f"{name}0"].take(bi)))
                   for n, name in ((n_d, "T_epd"), (n_c, "T_epc"), (n_etp, "T_etp")))
    terms = CommTerms(micro_batches=m, pp=p, vp=v, cp=c, passes=passes, tp=tp, tp_overlap=tp_overlap_column(cols, base, inp),
                      cp_rings=((cp_rings_per_step(np, micro_batches=m, layers_per_stage=per_stage, full=full),
                                 X["T_cp"].take(bi)),),
                      ep=ep, ep_pairs=m * moe_per_stage, moe_overlap=inp.moe_overlap, sm_share=comm_sm_share(inp.gpu),
                      pp_sends=(X["T_pp"].take(bi),), zero3=zero == 3, zero3_gather_s=X["T3_ag"].take(bi),
                      zero3_scatter_s=X["T3_rs"].take(bi), zero3_units=zero3_units(per_stage),
                      zero3_unshard_under_pp=stack_column(cols, base, inp, "zero3_unshard_under_pp"),
                      zero3_gather_host_sync=stack_column(cols, base, inp, "zero3_gather_host_sync"),
                      tp_per_gemm=stack_column(cols, base, inp, "tp_overlap_per_gemm"))
    return comp, critical(np, terms, comp)


def _compute_columns(cols: Choices, base: dict, X: dict, inp: SearchInputs) -> Compute:
    """:func:`_per_key`'s step 1, the compute of the keys ``cols`` (plan.operator_times, or with a given efficiency plan._flops and
    compute.elementwise_s; the wait for offloaded activations' host copies joins ``t_c``)."""
    import numpy as np

    spec, s = inp.space.spec, inp.space.seq
    bi, sp, rc = cols.bi, cols.sp, cols.rc
    t, c, b = (base[k].astype(float).take(bi) for k in ("t", "c", "b"))
    n = len(t)
    per_stage = X["per_stage"].take(bi)
    full = rc == 2
    tokens = b * s / c
    if inp.efficiency is None:
        t_c, t_fwd, t_layer_f, t_attn, tp_partners = _operator_columns(inp, base, cols,
                                                                       per_stage_base=X["per_stage"],
                                                                       groups=X["operator_group"])
        if not np.any(stack_column(cols, base, inp, "tp_overlap_per_gemm")):   # per row (CommTerms.tp_per_gemm)
            tp_partners = None
        fwd_share = t_fwd / t_c
    else:
        tp_partners = None
        peak = peak_flops_per_s(inp.gpu, inp.precision)
        f_layer, attn, recompute = K.layer_flops(spec, seq=s, flash_attention=inp.flash_attention)
        F_mb, fwd_share = K.micro_batch_flops(tokens=tokens, layers=per_stage, f_layer=f_layer,
                                              f_recompute=np.array([recompute[k] for k in RECOMPUTE])[rc],
                                              f_logits=spec.logits_flops, tp=t)
        ew = np.empty(n)
        for flag in (0, 1):
            sel = sp == flag
            ew[sel] = elementwise_layer_bytes_per_token(spec, seq=s, tp=t[sel], sp=bool(flag),
                                                        flash=inp.flash_attention)
        t_ew = elementwise_time_s(tokens=tokens, layers=per_stage, bytes_per_token_layer=ew,
                                  passes=K.elementwise_passes(np, full), hbm_bytes_per_s=gpu_row(inp.gpu)[1])
        t_c, t_fwd, t_layer_f, t_attn = K.micro_batch_times(F_mb=F_mb, fwd_share=fwd_share,
                                                            layer_flops=tokens * f_layer / t,
                                                            attention_flops=tokens * attn / t,
                                                            rate_flops_per_s=peak * inp.efficiency, elementwise_s=t_ew)
    if inp.cpu_offload_layers:   # plan: the wait for the activations' host copies joins t_c
        t_c = t_c + offload_exposed_s(np, offloaded_bytes=offloaded_bytes(cols, base, inp),
                                      host_bytes_per_s=host_link_bytes_per_s(inp.gpu), forward_s=t_fwd,
                                      backward_s=t_c - t_fwd)
    return Compute(compute_mb_s=t_c, forward_s=t_fwd, layer_forward_s=t_layer_f, attention_forward_s=t_attn,
                   forward_share=fwd_share, tp_partners_s=tp_partners)
