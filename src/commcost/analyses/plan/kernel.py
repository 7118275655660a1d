"""The one step kernel: ``plan``'s items 2-6 (critical communication, pipeline, data parallelism, optimizer,
losses, step) from the priced collectives and the compute of a micro-batch, on floats or numpy columns.

``plan`` runs :func:`evaluate` on one row with ``xp = SCALAR`` (:data:`commcost.core.xp.SCALAR`); ``search``
runs the same stages on the grid with ``xp = numpy`` (:mod:`commcost.analyses.plan.grid`): :func:`critical` on each
distinct ``(row, sp, recompute, ZeRO-3 or not)``, :func:`data_parallel` on the ZeRO-0/1/2 rows, :func:`finish` on
every row. Neither composes the step a second time: every term below is one of
:mod:`commcost.analyses.plan.compose`'s kernels (their docstrings hold the equations and sources), called once,
here. Values are never branched on (STYLE.md item 12); the only Python choices are the search-wide options
(``tp_comm_overlap``, ``moe_overlap``).

A collective enters as a term ``(count, T)``: ``plan`` passes one term per priced collective of its
``parallel/*_ops``, the grid one per column it priced (all-reduce, all-gather, reduce-scatter of TP, ...). The
per-term exposures come back (:class:`Critical`, :class:`DataParallel`), so ``plan`` words its lines from the
numbers the step is summed from (:mod:`commcost.analyses.plan.explain`).
"""

from __future__ import annotations

from dataclasses import dataclass

import commcost.analyses.plan.compose as K
from commcost.step.bucket_schedule import exposed_after_s, uniform_end_s
from commcost.step.losses import step_losses

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.core.xp import FloatOrArray

__all__ = ["Compute", "CommTerms", "Critical", "Buckets", "DataParallel", "StepColumns", "critical", "data_parallel",
           "finish", "evaluate", "Row"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Compute:
    """One micro-batch's compute on the slowest stage (item 1: :func:`commcost.workload.operators.micro_batch_operators`
    or :func:`commcost.analyses.plan.compose.micro_batch_times`), per row."""

    compute_mb_s: FloatOrArray
    """``t_c``: compute of one micro-batch, seconds (offload's wait included)."""
    forward_s: FloatOrArray
    """``t_fwd``: its forward, seconds."""
    layer_forward_s: FloatOrArray
    """``t_f``: one layer's forward, seconds."""
    attention_forward_s: FloatOrArray
    """``t_attention``: one micro-batch's attention forward on the stage, seconds."""
    forward_share: FloatOrArray
    """``F_fwd / F_mb`` (or ``t_fwd / t_c`` by operator): what the DP window leaves out."""
    tp_partners_s: tuple | None = None
    """The TP collectives' partner GEMMs (:func:`commcost.analyses.plan.compose.tp_partners_s`); None without."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CommTerms:
    """The priced collectives of the critical path and ZeRO-3, per row (``T`` one collective, seconds)."""

    micro_batches: FloatOrArray
    """``m``."""
    pp: FloatOrArray
    """``p``."""
    vp: FloatOrArray
    """``v``."""
    cp: FloatOrArray
    """``c``."""
    passes: FloatOrArray
    """Passes over a layer per micro-batch: 2, or 3 with full recomputation (:func:`commcost.parallel.layout.layer_passes`)."""
    tp: tuple = ()
    """``((count, T, gathers), ...)``: TP's collectives per step; ``gathers`` the all-gathers (partner GEMMs)."""
    tp_overlap: FloatOrArray = False
    """TP collectives overlap the GEMMs beside them (``--tp-comm-overlap``; per row in a search under ``--stack
    auto``: where the implied stack's recipes run it, :func:`commcost.analyses.plan.grid_memory.tp_overlap_column`)."""
    tp_per_gemm: FloatOrArray = True
    """Where ``Compute.tp_partners_s`` is given, the rows that overlap per GEMM with them (the stack's
    ``tp_overlap_per_gemm``); the others by the quarter-pass rule (:func:`commcost.analyses.plan.compose.tp_exposed_s`)."""
    cp_rings: tuple = ()
    """``((rings, T), ...)``: CP's send/recv rings per step."""
    ep: tuple = ()
    """``((count, T), ...)``: EP's all-to-alls and expert-TP collectives per step."""
    ep_pairs: FloatOrArray = 0.0
    """``N = m L_moe / p``: (micro-batch, MoE layer) pairs of the stage."""
    moe_overlap: str = "none"
    """``--moe-overlap`` (one choice per search)."""
    sm_share: float = 0.0
    """``sigma``: SMs the communication kernels take (:func:`commcost.parallel.dispatch.comm_sm_share`), beside
    overlapped all-to-alls and in the losses' contention."""
    pp_sends: tuple = ()
    """``(T, ...)``: the pipeline's point-to-point transfer of each priced line."""
    zero3: FloatOrArray = False
    """ZeRO-3 runs (bool)."""
    zero3_gather_s: FloatOrArray = 0.0
    """``g T_ag``: a unit's gathers, summed over the shard groups."""
    zero3_scatter_s: FloatOrArray = 0.0
    """``T_rs``: a unit's scatter, summed over the shard groups."""
    zero3_units: FloatOrArray = 1.0
    """``u = L/p + 1``: gathered units (:func:`commcost.parallel.zero.zero3_units`)."""
    zero3_unshard_under_pp: FloatOrArray = False
    """The stack keeps the stage gathered under PP (``stacks.json``)."""
    zero3_gather_host_sync: FloatOrArray = False
    """The stack synchronises the host before each ZeRO-3 gather (``stacks.json``; :func:`commcost.step.losses.host_sync_s`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Critical:
    """:func:`critical`'s result: the critical path per micro-batch, the pipeline, ZeRO-3 (per step unless named)."""

    tp: tuple
    """Exposed seconds of each TP term, in :attr:`CommTerms.tp`'s order."""
    cp: tuple
    """Exposed seconds of each CP term."""
    ep_wire_s: FloatOrArray
    """EP's time on the wire."""
    ep_s: FloatOrArray
    """EP exposed (:func:`commcost.analyses.plan.compose.ep_exposed_s`)."""
    pp: tuple
    """Exposed seconds of each pipeline term."""
    zero3_fwd_s: FloatOrArray
    """ZeRO-3 per unit and round, forward."""
    zero3_bwd_s: FloatOrArray
    """ZeRO-3 per unit and round, backward."""
    zero3_regather: FloatOrArray
    """1, or 0 when the stage stays gathered."""
    zero3_rounds: FloatOrArray
    """Rounds of gathers per step."""
    zero3_gather_s: FloatOrArray
    """``g T_ag`` (0 without ZeRO-3)."""
    zero3_scatter_s: FloatOrArray
    """``T_rs`` (0 without ZeRO-3)."""
    zero3_s: FloatOrArray
    """ZeRO-3 exposed per step."""
    zero3_wire_s: FloatOrArray
    """ZeRO-3's time on the wire per step."""
    zero3_gather_wire_s: FloatOrArray
    """ZeRO-3's parameter all-gathers' part of it."""
    zero3_host_sync: FloatOrArray
    """1 where the stack issues those gathers behind a host synchronisation, else 0."""
    compute_s: FloatOrArray
    """``m t_c``."""
    micro_batch_s: FloatOrArray
    """``t_mb``."""
    bubble_s: FloatOrArray
    """``(p-1) t_mb / v``."""

    @property
    def tp_s(self):
        """TP exposed per step."""
        return _sum(self.tp)

    @property
    def cp_s(self):
        """CP exposed per step."""
        return _sum(self.cp)

    @property
    def pp_s(self):
        """Pipeline transfers exposed per step."""
        return _sum(self.pp)


@dataclass(frozen=True, slots=True, kw_only=True)
class Buckets:
    """The DDP bucket timeline of one row's gradients on a uniform stream
    (:func:`commcost.step.bucket_schedule.uniform_buckets`), priced, and ZeRO-1/2's weight gathers."""

    times_s: tuple
    """``(T(c_1), T(c), T(last))``."""
    full: FloatOrArray
    """``m`` full buckets."""
    not_ready: tuple
    """``(f_0, f_1, f_m)``."""
    wire_s: FloatOrArray
    """``T_w``."""
    whole_s: FloatOrArray = 0.0
    """One reduction of the whole gradient (ZeRO-2's earlier micro-batches)."""
    zero2_each: FloatOrArray = False
    """ZeRO-2 on a stack that reduce-scatters every micro-batch (bool)."""
    gathers_s: tuple = ()
    """``k T_ag`` of each shard group's weight all-gather (ZeRO-1/2)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DataParallel:
    """:func:`data_parallel`'s result: ZeRO-0/1/2's exposed and wire seconds per step."""

    window_s: FloatOrArray
    """``W = f_b t_mb``."""
    buckets_s: FloatOrArray
    """``E``: the bucket timeline's exposed seconds."""
    buckets_wire_s: FloatOrArray
    """``T_w``."""
    gathers: tuple
    """Exposed seconds of each weight gather."""
    zero2_s: FloatOrArray
    """The earlier micro-batches' reduce-scatters exposed (0 unless :attr:`Buckets.zero2_each`)."""
    zero2_wire_s: FloatOrArray
    """Their time on the wire."""
    exposed_s: FloatOrArray
    """All of it."""
    wire_s: FloatOrArray
    """All of it on the wire."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StepColumns:
    """The step of every row and its parts (seconds per step)."""

    step_s: FloatOrArray
    """``compute + bubble + exposed + optimizer + losses``."""
    compute_s: FloatOrArray
    """``m t_c``."""
    pipeline_bubble_s: FloatOrArray
    """``(p-1) t_mb / v``."""
    exposed_comm_s: FloatOrArray
    """Exposed communication, every dimension: ``tp + cp + ep + pp + dp``."""
    optimizer_s: FloatOrArray
    """``t_opt = 28 N_shard / B_hbm``."""
    micro_batch_s: FloatOrArray
    """``t_mb``: one micro-batch on the slowest stage, compute and critical communication."""
    exposed_tp_s: FloatOrArray
    """TP exposed."""
    exposed_cp_s: FloatOrArray
    """CP exposed."""
    exposed_ep_s: FloatOrArray
    """EP exposed."""
    exposed_pp_s: FloatOrArray
    """Pipeline transfers exposed."""
    exposed_dp_s: FloatOrArray
    """Data parallelism exposed (ZeRO-3's gathers and scatters, or the buckets, gathers and ZeRO-2's scatters)."""
    dp_wire_s: FloatOrArray
    """Data parallelism's time on the wire (ZeRO-3's, or the buckets', gathers' and ZeRO-2's)."""
    losses: tuple
    """:data:`commcost.step.losses.LOSS_NAMES`' seconds, in that order."""
    critical: Critical | None = None
    """The per-term exposures (``terms`` of :func:`finish`; :func:`evaluate` passes them)."""
    data_parallel: DataParallel | None = None
    """The data-parallel terms (:func:`evaluate` only)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """Everything :func:`evaluate` needs of one row (or of columns where every stage applies to every row)."""

    compute: Compute
    """Item 1: one micro-batch's compute."""
    comm: CommTerms
    """The priced collectives of the critical path and ZeRO-3."""
    buckets: Buckets
    """ZeRO-0/1/2's bucket timeline and weight gathers (all zeros for ZeRO-3)."""
    dense_params: FloatOrArray
    """``N_d``: dense parameters per GPU, for the optimizer."""
    expert_params: FloatOrArray
    """``N_e``: expert parameters per GPU."""
    dense_ranks: FloatOrArray
    """``D``: the dense shard group (``d c``)."""
    expert_ranks: FloatOrArray
    """``D_e``: the expert-data-parallel group."""
    zero: FloatOrArray
    """ZeRO stage."""
    hbm_bytes_per_s: float
    """``B_hbm``: the GPU's HBM bandwidth, bytes/s."""
    world: FloatOrArray
    """``W``."""
    sync_one_s: FloatOrArray
    """The gradient norm's all-reduce over the job (:data:`commcost.step.losses.SYNC_BYTES`)."""


def _sum(values):
    out = 0.0
    for v in values:
        out = out + v
    return out


def critical(xp, c: CommTerms, t: Compute) -> Critical:
    """Items 2-3: the critical communication per micro-batch (TP, CP, EP in full or as far as overlap hides it, ZeRO-3's
    per-layer gathers) and the pipeline terms (:func:`commcost.analyses.plan.compose.pipeline_terms`)."""
    m = c.micro_batches
    tp = tuple(K.tp_exposed_s(xp, count=n, one_s=T, layer_fwd_s=t.layer_forward_s, passes=c.passes,
                              overlap=c.tp_overlap, partners_s=K.tp_partners_s(gathers=g, partners_s=t.tp_partners_s),
                              per_gemm=c.tp_per_gemm)
               for n, T, g in c.tp)
    critical_mb = 0.0
    for x in tp:
        critical_mb = critical_mb + x / m
    cp = tuple(K.cp_exposed_s(xp, rings=r, cp=c.cp, one_s=T, attention_s=t.attention_forward_s) for r, T in c.cp_rings)
    for x in cp:
        critical_mb = critical_mb + x / m
    wire_ep = _sum(n * T for n, T in c.ep)
    # with nothing overlapped the kernel is (1 - 0) W + 0 (...) = W exactly
    ex_ep = wire_ep if c.moe_overlap == "none" or not c.ep else K.ep_exposed_s(
        xp, wire_s=wire_ep, pairs=c.ep_pairs, layer_fwd_s=t.layer_forward_s, passes=c.passes,
        paired_share=K.ep_paired_share(xp, overlap=c.moe_overlap, pp=c.pp, vp=c.vp, micro_batches=m),
        sm_share=c.sm_share)
    critical_mb = critical_mb + ex_ep / m
    pp = tuple(K.pp_exposed_s(pp=c.pp, micro_batches=m, vp=c.vp, one_s=T) for T in c.pp_sends)
    T_ag = xp.where(c.zero3, c.zero3_gather_s, 0.0)
    T_rs = xp.where(c.zero3, c.zero3_scatter_s, 0.0)
    once = K.zero3_once(zero3=c.zero3, pp=c.pp, unshard_under_pp=c.zero3_unshard_under_pp)
    regather, rounds = K.zero3_regather_rounds(xp, once=once, micro_batches=m)
    fwd, bwd = K.zero3_layer_exposed_s(xp, gather_s=T_ag, scatter_s=T_rs, layer_fwd_s=t.layer_forward_s,
                                       regather=regather)
    z3_mb, z3 = K.zero3_exposed_s(fwd_s=fwd, bwd_s=bwd, units=c.zero3_units, micro_batches=m, gather_s=T_ag,
                                  rounds=rounds)
    # ZeRO-3's time on the wire (zero_ops' counts: 1 + regather gathers and one scatter per unit and round)
    z3_wire = rounds * c.zero3_units * ((1.0 + regather) * T_ag + T_rs)
    z3_gather_wire = rounds * c.zero3_units * (1.0 + regather) * T_ag
    compute, t_mb, bubble = K.pipeline_terms(micro_batches=m, pp=c.pp, vp=c.vp, compute_mb_s=t.compute_mb_s,
                                             critical_mb_s=critical_mb + z3_mb)
    return Critical(tp=tp, cp=cp, ep_wire_s=wire_ep, ep_s=ex_ep, pp=pp, zero3_fwd_s=fwd, zero3_bwd_s=bwd,
                    zero3_regather=regather, zero3_rounds=rounds, zero3_gather_s=T_ag, zero3_scatter_s=T_rs,
                    zero3_s=z3, zero3_wire_s=z3_wire, zero3_gather_wire_s=z3_gather_wire,
                    zero3_host_sync=xp.where(c.zero3_gather_host_sync, 1.0, 0.0), compute_s=compute, micro_batch_s=t_mb, bubble_s=bubble)


def data_parallel(xp, b: Buckets, *, micro_batch_s, compute_mb_s, forward_share, forward_s, pp,
                  micro_batches) -> DataParallel:
    """Item 4 for ZeRO-0/1/2: the DDP bucket timeline over the last micro-batch's backward window ``W``, in closed form
    (:func:`commcost.step.bucket_schedule.uniform_end_s`, the timeline's own), ZeRO-1/2's weight all-gather behind
    the next first forward, and ZeRO-2's earlier micro-batches' reduce-scatters where the stack runs them."""
    W = K.dp_backward_fraction(fwd_share=forward_share, compute_mb_s=compute_mb_s,
                               micro_batch_s=micro_batch_s) * micro_batch_s
    t_e = K.dp_accumulated_micro_batches(xp, pp=pp, micro_batches=micro_batches) * micro_batch_s
    end = uniform_end_s(xp, backward_end_s=t_e, window_s=W, times_s=b.times_s, full_buckets=b.full,
                        not_ready=b.not_ready)
    E = exposed_after_s(xp, end_s=end, backward_end_s=t_e, wire_s=b.wire_s)
    gathers = tuple(K.gather_exposed_s(xp, gather_s=g, fwd_s=forward_s) for g in b.gathers_s)
    extra = micro_batches - 1
    z2 = xp.where(b.zero2_each, K.zero2_micro_batch_exposed_s(xp, extra=extra, scatter_s=b.whole_s, window_s=W), 0.0)
    z2_wire = xp.where(b.zero2_each, extra * b.whole_s, 0.0)
    exposed, wire = E + _sum(gathers), b.wire_s + _sum(b.gathers_s)
    return DataParallel(window_s=W, buckets_s=E, buckets_wire_s=b.wire_s, gathers=gathers, zero2_s=z2,
                        zero2_wire_s=z2_wire, exposed_s=exposed + z2, wire_s=wire + z2_wire)


def finish(xp, *, compute_s, bubble_s, micro_batch_s, exposed_tp_s, exposed_cp_s, exposed_ep_s, exposed_pp_s,
           exposed_dp_s, dp_wire_s, dense_params, expert_params, dense_ranks, expert_ranks, zero, hbm_bytes_per_s,
           world, sm_share, sync_one_s, gather_wire_s=0.0, host_sync=False,
           terms: tuple = (None, None)) -> StepColumns:
    """Items 5-6: the optimizer (:func:`commcost.analyses.plan.compose.optimizer_s`), the losses that grow with the
    job (:func:`commcost.step.losses.step_losses`: the hidden DP traffic is its wire less its exposed; ``gather_wire_s``
    ZeRO-3's gathers' part of the wire, ``host_sync`` whether the stack issues them behind a host synchronisation)
    and the step."""
    exposed = exposed_tp_s + exposed_cp_s + exposed_ep_s + exposed_pp_s + exposed_dp_s
    optimizer = K.optimizer_s(xp, dense_params=dense_params, expert_params=expert_params, dense_ranks=dense_ranks,
                              expert_ranks=expert_ranks, zero=zero, hbm_bytes_per_s=hbm_bytes_per_s)
    losses = step_losses(xp, compute_s=compute_s, ranks=world, hidden_s=dp_wire_s - exposed_dp_s,
                         sm_share=sm_share, sync_one_s=sync_one_s, gather_wire_s=gather_wire_s,
                         dp_wire_s=dp_wire_s, host_sync=host_sync)
    step = K.step_s(compute_s=compute_s, bubble_s=bubble_s, exposed_s=exposed, optimizer_s=optimizer) + _sum(losses)
    return StepColumns(step_s=step, compute_s=compute_s, pipeline_bubble_s=bubble_s, exposed_comm_s=exposed,
                       optimizer_s=optimizer, micro_batch_s=micro_batch_s, exposed_tp_s=exposed_tp_s,
                       exposed_cp_s=exposed_cp_s, exposed_ep_s=exposed_ep_s, exposed_pp_s=exposed_pp_s,
                       exposed_dp_s=exposed_dp_s, dp_wire_s=dp_wire_s, losses=tuple(losses),
                       critical=terms[0], data_parallel=terms[1])


def evaluate(xp, row: Row) -> StepColumns:
    """The step of ``row``: :func:`critical`, :func:`data_parallel`, :func:`finish`, every stage on every row (a
    ZeRO-3 row carries no buckets: their terms are 0; a ZeRO-0/1/2 row no ZeRO-3 gathers). What ``plan`` runs on its
    one row; the grid runs the three stages itself, each on the rows it applies to."""
    t, c = row.compute, row.comm
    crit = critical(xp, c, t)
    dp = data_parallel(xp, row.buckets, micro_batch_s=crit.micro_batch_s, compute_mb_s=t.compute_mb_s,
                       forward_share=t.forward_share, forward_s=t.forward_s, pp=c.pp, micro_batches=c.micro_batches)
    out = finish(xp, compute_s=crit.compute_s, bubble_s=crit.bubble_s, micro_batch_s=crit.micro_batch_s,
                 exposed_tp_s=crit.tp_s, exposed_cp_s=crit.cp_s, exposed_ep_s=crit.ep_s, exposed_pp_s=crit.pp_s,
                 exposed_dp_s=crit.zero3_s + dp.exposed_s, dp_wire_s=crit.zero3_wire_s + dp.wire_s,
                 dense_params=row.dense_params, expert_params=row.expert_params, dense_ranks=row.dense_ranks,
                 expert_ranks=row.expert_ranks, zero=row.zero, hbm_bytes_per_s=row.hbm_bytes_per_s, world=row.world,
                 sm_share=c.sm_share, sync_one_s=row.sync_one_s, gather_wire_s=crit.zero3_gather_wire_s,
                 host_sync=crit.zero3_host_sync, terms=(crit, dp))
    return out
