"""One parallel training configuration, end to end: step time, breakdown, throughput, memory, advice.

Symbols: ``m`` micro-batches, ``p`` stages, ``v`` virtual stages, ``t`` TP, ``c`` CP; ``T_x`` the
CommModel's time of one collective of kind x; ``eta`` the compute efficiency.

1. **Compute per micro-batch** on the slowest stage (the last: its ``L/p`` layers and the
   logits): ``F_mb = (b s / c) [ (L/p) (3 f_layer + r) + 3 f_logits ] / t`` executed FLOPs, with
   ``f_layer`` one layer's forward FLOPs per token (matrices, and attention's score products at
   :data:`~commcost.workload.transformer.CAUSAL_EXECUTED_FRACTION` of the square with flash attention) and
   ``r`` the recomputation (full: ``f_layer``; selective: the score products);
   ``t_c = F_mb / (P_peak eta) + Q_mb / (B_hbm eta_hbm)`` (:mod:`commcost.workload.compute`), the second term the
   memory-bound element-wise kernels (:func:`commcost.workload.compute.elementwise_bytes_per_token`): ``Q_mb`` their HBM bytes
   per micro-batch, forward, twice that backward (and once more with full recomputation). With activation
   offloading (``cpu_offload_layers`` ``N``, :mod:`commcost.workload.offload`) ``t_c`` also holds the wait for the
   host copies, ``max(0, N A / B_h - t_fwd) + max(0, N A / B_h - t_bwd)`` (``compute_by_operator`` ``offload_s``).
2. **Critical communication per micro-batch**: TP collectives in full, EP's all-to-alls (NCCL or
   node-aware, :mod:`commcost.parallel.dispatch`) in full or, with ``--moe-overlap``, down to the
   bound of :func:`commcost.analyses.plan.compose.ep_exposed_s`, CP's ring
   ``(c-1) max(0, T - t_attention/c)`` per layer and pass, ZeRO-3's per-layer gathers
   ``max(0, T - t_layer)``; ``t_mb = t_c + that``.
3. **Pipeline** (:mod:`commcost.step.schedule`): ``m t_mb + (p-1) t_mb / v``, plus the point-to-point
   transfers on the critical path (:func:`commcost.parallel.pipeline.exposed_p2p_count`).
4. **Data parallel** (ZeRO-0: all-reduce; ZeRO-1/2: reduce-scatter) through the DDP bucket timeline
   (:func:`commcost.step.timeline.simulate_timeline`) over the last micro-batch's backward window;
   ZeRO-1/2's weight all-gather hides behind the next first forward: exposed ``max(0, T_ag - t_fwd)``.
   When the DP group crosses nodes while ``n`` critical groups (TP, CP, EP) also cross them, the
   DP collectives get ``1/(1+n)`` of the NIC (groups that run at the same time share the NICs).
5. **Optimizer**: Adam streams ``28`` bytes per parameter of its shard through HBM (fp32 master,
   two moments read and written, bf16 gradient read and weight written): ``t_opt = 28 N_shard / B_hbm``.
6. **Step** ``= compute + bubble + exposed communication + optimizer + losses`` (the losses that grow with the
   job, :mod:`commcost.step.losses`: the slowest of ``W`` ranks, communication contending with compute, the
   gradient norm's all-reduce: :func:`plan_losses`), between the bounds
   ``compute + bubble + optimizer`` (everything hidden) and :attr:`Plan.no_overlap_s` (nothing hidden); tokens/s/GPU ``= B s / (step W)``;
   model FLOPs ``= 3 B s f_model`` (:meth:`~commcost.workload.transformer.TransformerSpec.model_forward_flops_per_token`:
   the Megatron-LM/PaLM convention, full attention square, no recomputation); TFLOP/s/GPU
   ``= model FLOPs / (step W)``; MFU ``=`` that over ``P_peak`` at the plan's precision.

The composition (items 1-6) is :mod:`commcost.analyses.plan.compose`'s kernels, called here on floats
(``xp = SCALAR``) and by ``commcost search`` on numpy columns; this module prices the collectives,
names the lines and builds the :class:`Plan`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from commcost.comm.collectives import Collective
from commcost.analyses.plan.compose import OPTIMIZER_HBM_BYTES_PER_PARAM  # item 5; re-exported
from commcost.analyses.plan.plan_dp import CommLine, _data_parallel_lines, _zero3_lines, plan_stack  # re-exported
from commcost.core.errors import InputError
from commcost.workload.memory import MemoryBreakdown, check_recompute_modules, memory_per_gpu, params_per_gpu
from commcost.workload.memory import ACTIVATION_BYTES, GRAD_BYTES
from commcost.workload.nccl_memory import nvls_capable
from commcost.parallel.layout import CommOp, Layout, check_layout, layer_passes, layout_group, leaves_node
from commcost.parallel.layout import stage_end_shares, stage_layers
from commcost.hardware.registry import gpu_row
from commcost.workload.compute import elementwise_layer_bytes_per_token, elementwise_time_s
from commcost.workload.transformer import TransformerSpec
from commcost.analyses.plan.compose import MOE_OVERLAPS
from commcost.analyses.plan.compose import layer_flops
from commcost.analyses.plan.compose import micro_batch_flops
from commcost.analyses.plan.compose import optimizer_s
from commcost.core.validation import require_efficiency, require_count
from commcost.core.validation import require_finite_positive
from commcost.core.xp import SCALAR
from commcost.parallel.context import context_ops
from commcost.parallel.ddp import ddp_ops
from commcost.parallel.dispatch import FP8_DISPATCH_BYTES
from commcost.parallel.dispatch import a2a_one_s
from commcost.parallel.dispatch import a2a_parts
from commcost.parallel.dispatch import check_a2a
from commcost.parallel.dispatch import comm_sm_share
from commcost.parallel.expert import expert_ops
from commcost.parallel.expert import moe_layers_per_stage
from commcost.parallel.pipeline import pipeline_ops
from commcost.parallel.tensor import regather_passes
from commcost.parallel.tensor import tensor_ops
from commcost.parallel.zero import zero3_units
from commcost.parallel.zero import zero_ops
from commcost.step.bucket_advice import recommend_buckets
from commcost.step.losses import LOSS_NAMES, SYNC_BYTES, Losses, dp_line_terms, step_losses
from commcost.workload.compute import mfu_frontier
from commcost.workload.compute import peak_flops_per_s
from commcost.workload.compute import precision_class
from commcost.workload.offload import check_cpu_offload
from commcost.workload.offload import host_link_bytes_per_s
from commcost.workload.offload import offload_exposed_s
from commcost.workload.operators import kernel_rates
from commcost.workload.operators import micro_batch_operators
from commcost.workload.stacks import resolve_stack
import commcost.analyses.plan.compose as K

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.comm.model import CommModel

__all__ = ["PlanInputs", "CommLine", "Plan", "plan", "collective_ops", "operator_times", "plan_memory", "plan_stack",
           "OPTIMIZER_HBM_BYTES_PER_PARAM"]

@dataclass(frozen=True, slots=True, kw_only=True)
class PlanInputs:
    """Everything one plan needs besides the CommModel (SI units)."""

    spec: TransformerSpec
    """The model."""
    layout: Layout
    """The parallel layout."""
    seq: int
    """Sequence length s, tokens."""
    gpu: str
    """GPU preset (gpus.json / compute.json)."""
    gpus_per_node: int
    """GPUs G per node (NVLink domain), for placement."""
    precision: str = "bf16"
    """GEMM precision: bf16, fp16, fp8, mxfp8, nvfp4."""
    efficiency: float | None = None
    """Compute efficiency eta on every FLOP (the one-rate model a calibration fits); None prices compute by
    operator (:mod:`commcost.workload.operators`)."""
    flash_attention: bool = True
    """Attention runs a flash kernel (no s^2 activations; causal blocks skipped)."""
    activation_bytes: float = ACTIVATION_BYTES
    """Bytes per activation element on the wire (bf16)."""
    grad_bytes: float = GRAD_BYTES
    """Bytes per gradient element reduced across data parallel (bf16)."""
    bucket_cap_bytes: int | None = None
    """DP bucket cap; None takes DDP's default (25 MiB, first bucket 1 MiB)."""
    tp_comm_overlap: bool = False
    """TP collectives overlap the GEMMs beside them (Transformer Engine userbuffers, NeMo's
    ``tp_comm_overlap``): each of a layer's four collectives per pass hides behind a quarter of that
    pass's compute, exposed ``max(0, T - t_pass / 4)``."""
    stack: str = "auto"
    """The training stack (:mod:`commcost.workload.stacks`): its kernels, recomputation and ZeRO-3 gathers;
    ``auto`` infers it from the layout."""
    compiled: bool = False
    """torch.compile fuses the element-wise chains (``--compile``)."""
    fp8_attention: bool = False
    """fp8 recipes also run the attention core in fp8 (Transformer Engine's ``fp8_dpa``); by default it
    stays in bf16, as Transformer Engine and torchao leave it."""
    a2a: str = "nccl"
    """How expert dispatch and combine run (:mod:`commcost.parallel.dispatch`): ``nccl`` all-to-all or
    ``deepep`` (node-aware: NVLink inside the node, one network transfer per destination node)."""
    fp8_dispatch: bool = False
    """The forward dispatch carries fp8 (DeepEP's fp8 dispatch); needs ``a2a = deepep``."""
    moe_overlap: str = "none"
    """Expert all-to-all hidden behind another micro-batch's compute (:func:`commcost.analyses.plan.compose.ep_paired_share`):
    ``none``, ``1f1b`` (Megatron-Core's 1F1B all-to-all overlap) or ``dualpipe``."""
    expert_load: float = 1.0
    """``I``: the busiest rank's routed tokens over the mean (1 balanced, as the published benchmarks
    force routing; the capacity factor with tokens padded to capacity; or a measured max/mean). It
    scales the expert GEMMs' rows and the all-to-all bytes of the busiest rank."""
    cpu_offload_layers: int = 0
    """``N``: layers whose activations go to host memory and back (Megatron-Core ``cpu_offloading_num_layers``,
    :mod:`commcost.workload.offload`); 0 keeps every activation on the GPU."""
    recompute_modules: tuple[str, ...] = ()
    """Megatron-Core's ``recompute_modules`` beside the core attention (:data:`commcost.workload.memory.RECOMPUTE_MODULES`:
    ``mla_up_proj``, ``mlp``): the memory they free (:func:`commcost.workload.memory.layer_activation_bytes`); their
    few recomputed FLOPs are not priced. Empty: none."""
    defaults_note: str = ""
    """One line on the defaults assumed for what the user did not give (:func:`commcost.workload.recipes.recipe_line`:
    a MoE run with no stack or recipe flag takes its recipes' expert TP, dispatcher and overlap); empty: none."""

    def __post_init__(self) -> None:

        require_count("seq", self.seq)
        require_count("gpus_per_node", self.gpus_per_node)
        precision_class(self.precision)
        if self.efficiency is not None:
            require_efficiency(self.efficiency)
        resolve_stack(self.stack, self.layout)
        check_moe_options(a2a=self.a2a, fp8_dispatch=self.fp8_dispatch, moe_overlap=self.moe_overlap,
                          expert_load=self.expert_load, pp=self.layout.pp, vp=self.layout.vp)
        check_layout(self.layout, gpus=self.layout.world, layers=self.spec.layers, heads=self.spec.heads,
                     kv_heads=self.spec.n_kv, seq=self.seq, experts=self.spec.experts)
        check_cpu_offload(self.cpu_offload_layers, layers=self.spec.layers, pp=self.layout.pp,
                          recompute=self.layout.recompute)
        if self.cpu_offload_layers:
            host_link_bytes_per_s(self.gpu)
        check_recompute_modules(self.recompute_modules)


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """The priced configuration (module docstring for every formula)."""

    inputs: PlanInputs
    """What was planned."""
    step_s: float
    """Step time, seconds."""
    compute_s: float
    """``m t_c``."""
    pipeline_bubble_s: float
    """``(p-1) t_mb / v``."""
    exposed_comm_s: float
    """Sum of the ``exposed_s`` of :attr:`comm`."""
    optimizer_s: float
    """``t_opt``."""
    micro_batch_s: float
    """``t_mb``: one micro-batch on the slowest stage, compute and critical communication."""
    tokens_per_s_per_gpu: float
    """``B s / (step W)``."""
    model_flops_per_step: float
    """``3 B s f_model``."""
    executed_flops_per_gpu: float
    """FLOPs one GPU of the slowest stage executes per step."""
    tflops_per_gpu: float
    """Model TFLOP/s per GPU."""
    mfu: float
    """Model FLOP/s per GPU over the peak at the plan's precision."""
    efficiency: float
    """eta used."""
    efficiency_source: str
    """Where eta comes from."""
    peak_flops_per_s: float
    """``P_peak`` at the plan's precision."""
    comm: tuple[CommLine, ...]
    """Every kind of collective."""
    memory: MemoryBreakdown
    """Bytes per GPU."""
    comm_model: str
    """The CommModel's one-line description."""
    stack: str = "megatron"
    """The stack priced (:mod:`commcost.workload.stacks`), ``auto`` resolved."""
    stack_source: str = ""
    """Why that stack."""
    compute_by_operator: dict = field(default_factory=dict)
    """Seconds per step of each operator group (``m x`` one micro-batch's, :class:`commcost.workload.operators.OperatorTimes`);
    empty when a given efficiency replaces the operator model."""
    warnings: tuple[str, ...] = field(default=())
    """Scope warnings of the CommModel."""
    dp_timeline: tuple | None = field(default=None, compare=False, repr=False)
    """``(TimelineInputs, all-reduce cost)`` of the data-parallel gradient timeline; None without one."""
    losses: Losses = field(default_factory=Losses)
    """The losses that grow with the job (:mod:`commcost.step.losses`), already in :attr:`step_s`."""

    @property
    def bucket_advice(self):
        """The DP gradients' bucket advice on :attr:`dp_timeline` (:mod:`commcost.step.bucket_advice`)."""
        return None if self.dp_timeline is None else recommend_buckets(self.dp_timeline[0],
                                                                       allreduce_s=self.dp_timeline[1])

    @property
    def wire_s(self) -> float:
        """Communication on the wire per step, every kind summed (``sum time_s``)."""
        return sum(line.time_s for line in self.comm)

    @property
    def no_overlap_s(self) -> float:
        """Bound: nothing overlaps, ``compute + bubble + wire + optimizer`` and the losses (STYLE.md item 7: the
        modelled step lies between it and :attr:`all_hidden_s`)."""
        return self.compute_s + self.pipeline_bubble_s + self.wire_s + self.optimizer_s + self.losses.total_s

    @property
    def all_hidden_s(self) -> float:
        """Bound: every collective hidden, ``compute + bubble + optimizer`` (and the losses)."""
        return self.compute_s + self.pipeline_bubble_s + self.optimizer_s + self.losses.total_s

    def exposed_by_dimension(self) -> dict[str, float]:
        """Exposed seconds per dimension (tp, cp, ep, pp, dp)."""
        out: dict[str, float] = {}
        for line in self.comm:
            out[line.comm.dimension] = out.get(line.comm.dimension, 0.0) + line.exposed_s
        return out


def check_moe_options(*, a2a: str, fp8_dispatch: bool, moe_overlap: str, expert_load: float, pp: int,
                      vp: int) -> None:
    """The MoE options' rules: ``--fp8-dispatch`` is DeepEP's; Megatron-Core's 1F1B all-to-all overlap
    needs the interleaved schedule when ``p > 1``; DualPipe runs an even number of stages; ``I >= 1``."""

    check_a2a(a2a)
    if moe_overlap not in MOE_OVERLAPS:
        raise InputError(f"unknown MoE overlap {moe_overlap!r} (valid: {', '.join(MOE_OVERLAPS)})")
    if fp8_dispatch and a2a != "deepep":
        raise InputError("--fp8-dispatch is DeepEP's fp8 dispatch: it needs --a2a deepep")
    if moe_overlap == "1f1b" and pp > 1 and vp == 1:
        raise InputError(f"the 1F1B all-to-all overlap needs the interleaved schedule when pp > 1 (pp = {pp}, vp = 1)")
    if moe_overlap == "dualpipe" and pp % 2:
        raise InputError(f"DualPipe needs an even number of pipeline stages, got pp = {pp}")
    require_finite_positive("expert_load", expert_load)
    if expert_load < 1:
        raise InputError(f"the expert load imbalance (busiest over mean) is at least 1, got {expert_load:g}")


def dispatch_bytes(inp: PlanInputs) -> float | None:
    """``q_d``: the forward dispatch's bytes per element when it differs from the activations' (fp8 dispatch)."""

    return FP8_DISPATCH_BYTES if inp.fp8_dispatch else None


def collective_ops(inp: PlanInputs) -> tuple[CommOp, ...]:
    """Every collective one GPU issues per step, from each dimension's module."""

    spec, L, s, G, q = inp.spec, inp.layout, inp.seq, inp.gpus_per_node, inp.activation_bytes
    per_stage = stage_layers(spec.layers, L)
    dense, expert = params_per_gpu(spec, L)
    moe_per_stage = moe_layers_per_stage(moe_layers=spec.moe_layer_count, layers=spec.layers, layers_per_stage=per_stage)
    regather = regather_passes(SCALAR, selective=plan_stack(inp).selective,
                               recompute_selective=L.recompute == "selective")
    ops = [*tensor_ops(layout=L, hidden=spec.hidden, seq=s, layers_per_stage=per_stage, activation_bytes=q,
                       gpus_per_node=G, moe_layers_per_stage=moe_per_stage, shared_experts=spec.shared_experts,
                       regather_passes=regather),
           *context_ops(layout=L, kv_heads=spec.n_kv, head_dim=spec.d, seq=s, layers_per_stage=per_stage,
                        activation_bytes=q, gpus_per_node=G),
           *expert_ops(layout=L, hidden=spec.hidden, seq=s, top_k=spec.top_k,
                       moe_layers_per_stage=moe_per_stage, activation_bytes=q, gpus_per_node=G,
                       dispatch_bytes=dispatch_bytes(inp), expert_load=inp.expert_load),
           *pipeline_ops(layout=L, hidden=spec.hidden, seq=s, activation_bytes=q, gpus_per_node=G)]
    if L.zero == 0:
        ops += ddp_ops(layout=L, dense_params_per_gpu=dense, expert_params_per_gpu=expert, grad_bytes=inp.grad_bytes,
                       gpus_per_node=G)
    else:
        ops += zero_ops(layout=L, dense_params_per_gpu=dense, expert_params_per_gpu=expert, layers_per_stage=per_stage,
                        grad_bytes=inp.grad_bytes, weight_bytes=2.0, gpus_per_node=G,
                        gathers_per_layer=zero3_gathers_per_layer(inp), once_per_step=zero3_once_per_step(inp))
    return tuple(ops)


def _flops(inp: PlanInputs) -> tuple[float, float, float, float]:
    """``(F_mb, f_fwd_share, f_layer_fwd, f_attention_fwd)`` per micro-batch on the slowest stage, executed (a split
    that counts the ends: the slowest stage by FLOPs, :func:`commcost.parallel.layout.stage_end_shares`)."""

    spec, L = inp.spec, inp.layout
    f_layer, attn, recompute = layer_flops(spec, seq=inp.seq, flash_attention=inp.flash_attention)
    extra = recompute[L.recompute]
    tokens = L.micro_batch * inp.seq / L.cp
    k_layer, k_head = stage_end_shares(SCALAR, counted=L.split_counts_ends, pp=L.pp,
                                       layer_s=3.0 * f_layer + extra, head_s=3.0 * spec.logits_flops)
    F_mb, fwd_share = micro_batch_flops(tokens=tokens, layers=stage_layers(spec.layers, L) - 1.0 + k_layer,
                                        f_layer=f_layer, f_recompute=extra, f_logits=k_head * spec.logits_flops,
                                        tp=L.tp)
    return F_mb, fwd_share, tokens * f_layer / L.tp, tokens * attn / L.tp


def plan(inp: PlanInputs, model: CommModel) -> Plan:
    """Price ``inp`` with ``model`` (module docstring; the composition is :mod:`commcost.analyses.plan.compose`'s)."""

    spec, L = inp.spec, inp.layout
    peak = peak_flops_per_s(inp.gpu, inp.precision)
    stack_name, stack_src = resolve_stack(inp.stack, L)
    F_mb, fwd_share, f_layer, f_attn = _flops(inp)
    by_operator: dict = {}
    tp_partners = None
    if inp.efficiency is None:
        ops_t = operator_times(inp)
        t_c, t_fwd, t_layer_f, t_attn = (ops_t.compute_s, ops_t.forward_s, ops_t.layer_forward_s,
                                         ops_t.attention_forward_s)
        tp_partners = ops_t.tp_partners_s if plan_stack(inp).tp_overlap_per_gemm else None
        fwd_share = t_fwd / t_c
        eta = F_mb / (peak * t_c)
        eta_src = f"operator model (hardware/kernels.json), stack {stack_name}: executed FLOPs / (peak x compute)"
        by_operator = {k: L.micro_batches * v for k, v in ops_t.by_operator().items()}
    else:
        eta, eta_src = inp.efficiency, "given (--efficiency / --mfu or a calibration): one rate for every FLOP"
        t_c, t_fwd, t_layer_f, t_attn = K.micro_batch_times(F_mb=F_mb, fwd_share=fwd_share, layer_flops=f_layer,
                                                            attention_flops=f_attn, rate_flops_per_s=peak * eta,
                                                            elementwise_s=elementwise_s(inp))
    mem = plan_memory(inp)
    if inp.cpu_offload_layers:
        stall = offload_exposed_s(SCALAR, offloaded_bytes=mem.offloaded_bytes,
                                  host_bytes_per_s=host_link_bytes_per_s(inp.gpu), forward_s=t_fwd,
                                  backward_s=t_c - t_fwd)
        t_c += stall
        if by_operator:
            by_operator["offload_s"] = L.micro_batches * stall
    m, p, v = L.micro_batches, L.pp, L.vp
    per_stage = stage_layers(spec.layers, L)
    ops = collective_ops(inp)
    warnings: list[str] = []
    priced: list[tuple[CommOp, float, str]] = [_priced(inp, model, op, warnings) for op in ops]
    G = inp.gpus_per_node
    crossing = sum(leaves_node(*layout_group(L, dim, G)) for dim in ("tp", "cp", "ep"))
    passes = layer_passes(SCALAR, L.recompute == "full")
    lines: list[CommLine] = []
    critical_mb = 0.0
    dp_ops, advice = [], []
    ep_wire = sum(op.count_per_step * T for op, T, _ in priced if op.dimension == "ep")
    ep_exposed = K.ep_exposed_s(SCALAR, wire_s=ep_wire, pairs=m * spec.moe_layer_count / spec.layers * per_stage,
                                layer_fwd_s=t_layer_f, passes=passes,
                                paired_share=K.ep_paired_share(SCALAR, overlap=inp.moe_overlap, pp=p, vp=v,
                                                               micro_batches=m),
                                sm_share=comm_sm_share(inp.gpu) if inp.moe_overlap != "none" else 0.0) if ep_wire > 0 else 0.0
    for op, T, alg in priced:
        n = op.count_per_step
        if op.dimension == "tp":
            exposed = K.tp_exposed_s(SCALAR, count=n, one_s=T, layer_fwd_s=t_layer_f, passes=passes,
                                     overlap=inp.tp_comm_overlap,
                                     partners_s=K.tp_partners_s(gathers=op.op == Collective.ALL_GATHER,
                                                                partners_s=tp_partners))
            critical_mb += exposed / m
        elif op.dimension == "ep":    # the EP lines share the exposed time by their wire time
            exposed = ep_exposed * (n * T / ep_wire) if ep_wire > 0 else 0.0
            critical_mb += exposed / m
        elif op.dimension == "cp":
            exposed = K.cp_exposed_s(SCALAR, rings=n / (L.cp - 1), cp=L.cp, one_s=T, attention_s=t_attn)
            critical_mb += exposed / m
        elif op.dimension == "pp":
            exposed = K.pp_exposed_s(pp=p, micro_batches=m, vp=v, one_s=T)
        else:
            dp_ops.append((op, T, alg))
            continue
        lines.append(CommLine(comm=op, one_s=T, algorithm=alg, time_s=n * T, exposed_s=exposed))
    if L.zero == 3:
        zero3_mb, zero3_lines = _zero3_lines(dp_ops, m=m, units=zero3_units(per_stage), t_layer_f=t_layer_f,
                                             gathers=zero3_gathers_per_layer(inp), once=zero3_once_per_step(inp))
        critical_mb += zero3_mb
        lines += zero3_lines
        dp_ops = []
    compute, t_mb, bubble = K.pipeline_terms(micro_batches=m, pp=p, vp=v, compute_mb_s=t_c,
                                             critical_mb_s=critical_mb)
    if dp_ops:
        lines += _data_parallel_lines(inp, model, dp_ops, t_mb=t_mb, t_c=t_c, t_fwd=t_fwd, fwd_share=fwd_share,
                                      crossing=crossing, advice=advice)
    exposed_total = sum(line.exposed_s for line in lines)
    optimizer = _optimizer_s(inp)
    W = L.world
    losses = plan_losses(inp, model, lines, compute_s=compute)
    step = K.step_s(compute_s=compute, bubble_s=bubble, exposed_s=exposed_total, optimizer_s=optimizer) + losses.total_s
    tokens = L.global_batch * inp.seq
    model_flops = 3.0 * tokens * spec.model_forward_flops_per_token(inp.seq)
    tflops = model_flops / (step * W) / 1e12
    frontier = mfu_frontier(inp.gpu, inp.precision)
    if frontier is not None and tflops * 1e12 / peak > frontier[0]:
        warnings.append(f"MFU {tflops * 1e12 / peak:.1%} is above the best published {frontier[0]:.1%} on {inp.gpu} "
                        f"{inp.precision} ({frontier[1]}): treat this step as optimistic")
    return Plan(inputs=inp, step_s=step, compute_s=compute, pipeline_bubble_s=bubble, exposed_comm_s=exposed_total,
                optimizer_s=optimizer, micro_batch_s=t_mb,
                tokens_per_s_per_gpu=K.tokens_per_s_per_gpu(tokens_per_step=tokens, step_s=step, gpus=W),
                model_flops_per_step=model_flops, executed_flops_per_gpu=m * F_mb, tflops_per_gpu=tflops,
                mfu=tflops * 1e12 / peak, efficiency=eta, efficiency_source=eta_src, peak_flops_per_s=peak,
                comm=tuple(lines), memory=mem, comm_model=model.describe(), stack=stack_name, stack_source=stack_src,
                compute_by_operator=by_operator, warnings=tuple(warnings),
                dp_timeline=advice[0] if advice else None, losses=losses)


def plan_losses(inp: PlanInputs, model: CommModel, lines, *, compute_s: float) -> Losses:
    """The losses that grow with the job (:mod:`commcost.step.losses`): the slowest of the ``W`` ranks on the
    compute, the compute slowed by the DP communication hidden beside it, the gradient norm's all-reduce over the
    job, ZeRO-3's gathers behind a host synchronisation (:func:`commcost.step.losses.dp_line_terms`)."""
    W, G, sync = inp.layout.world, inp.gpus_per_node, plan_stack(inp).zero3_gather_host_sync
    sync_one = model.cost(Collective.ALL_REDUCE, SYNC_BYTES, W, ranks_per_node=min(G, W)).total_s if W > 1 else 0.0
    return Losses(**dict(zip(LOSS_NAMES, step_losses(SCALAR, compute_s=compute_s, ranks=W, sync_one_s=sync_one,
                                                     sm_share=comm_sm_share(inp.gpu), host_sync=sync,
                                                     **dp_line_terms(lines, zero3=inp.layout.zero == 3)))))


def plan_memory(inp: PlanInputs) -> MemoryBreakdown:
    """:func:`commcost.workload.memory.memory_per_gpu` of ``inp`` under its stack (``auto`` resolved for its layout)
    and precision: what :func:`plan` reports, and what the advice re-asks for changed layouts."""

    st = plan_stack(inp)
    return memory_per_gpu(inp.spec, inp.layout, seq=inp.seq, capacity_bytes=_capacity(inp.gpu),
                          flash=inp.flash_attention, stack=st, fp8=precision_class(inp.precision) != "bf16",
                          expert_load=inp.expert_load, offloaded_layers=inp.cpu_offload_layers,
                          gpus_per_node=inp.gpus_per_node, nvls=nvls_capable(inp.gpu),
                          recompute_modules=inp.recompute_modules)


def _priced(inp: PlanInputs, model: CommModel, op: CommOp, warnings: list[str]) -> tuple[CommOp, float, str]:
    """``(op, T, algorithm)`` of one collective of :func:`plan` (none for a group of one or an empty message, the EP
    all-to-all by :func:`_ep_priced`); the model's scope warning joins ``warnings`` once."""
    if op.group_size == 1 or op.size_bytes == 0:
        return op, 0.0, "none"
    if op.dimension == "ep" and op.op is Collective.ALL_TO_ALL:
        return _ep_priced(inp, model, op, warnings)
    c = model.cost(op.op, op.size_bytes, op.group_size, ranks_per_node=op.ranks_per_node)
    w = model.scope_warning(op.op, op.group_size)
    if w and w not in warnings:
        warnings.append(w)
    return op, c.total_s, c.algorithm.value


def _ep_priced(inp: PlanInputs, model: CommModel, op: CommOp, warnings: list[str]) -> tuple[CommOp, float, str]:
    """``(op, T, algorithm)`` of one EP all-to-all as ``inp.a2a`` runs it (:func:`commcost.parallel.dispatch.a2a_one_s`)."""

    def price(kind, size, group, rpn):
        w = model.scope_warning(kind, group)
        if w and w not in warnings:
            warnings.append(w)
        return model.cost(kind, size, group, ranks_per_node=rpn).total_s

    kw = dict(size_bytes=op.size_bytes, group=op.group_size, ranks_per_node=op.ranks_per_node,
              experts=inp.spec.experts, top_k=inp.spec.top_k)
    T = a2a_one_s(price, inp.a2a, **kw)
    if len(a2a_parts(inp.a2a, **kw)) > 1:
        return op, T, "node-aware (deepep)"
    return op, T, model.cost(op.op, op.size_bytes, op.group_size, ranks_per_node=op.ranks_per_node).algorithm.value


def operator_times(inp: PlanInputs):
    """:func:`commcost.workload.operators.micro_batch_operators` of one micro-batch on the slowest stage."""

    spec, L = inp.spec, inp.layout
    st = plan_stack(inp)
    rates = kernel_rates(inp.gpu, inp.precision, st, fp8_attention=inp.fp8_attention,
                         flash=inp.flash_attention)
    return micro_batch_operators(SCALAR, spec, st, rates, tokens=L.micro_batch * inp.seq / L.cp, seq=inp.seq,
                                 layers=stage_layers(spec.layers, L), tp=L.tp, sp=L.sequence_parallel, ep=L.ep,
                                 expert_tp=L.expert_tp, full=L.recompute == "full",
                                 selective=L.recompute == "selective", micro_batches=L.micro_batches,
                                 flash=inp.flash_attention, expert_load=inp.expert_load, a2a=inp.a2a,
                                 cp=L.cp, split_counts_ends=L.split_counts_ends, pp=L.pp)


def zero3_gathers_per_layer(inp: PlanInputs) -> int:
    """``g``: ZeRO-3 all-gathers per layer and pass of the plan's stack (:mod:`commcost.parallel.zero`)."""
    return plan_stack(inp).zero3_gathers_per_layer


def zero3_once_per_step(inp: PlanInputs) -> bool:
    """Whether ZeRO-3 gathers and scatters once per step: the stack keeps the stage gathered under
    pipeline parallelism (:attr:`commcost.workload.stacks.Stack.zero3_unshard_under_pp`) and ``p > 1``."""
    L = inp.layout
    return K.zero3_once(zero3=L.zero == 3, pp=L.pp, unshard_under_pp=plan_stack(inp).zero3_unshard_under_pp)


@lru_cache(maxsize=64)
def elementwise_s(inp: PlanInputs) -> float:
    """``Q_mb / (B_hbm eta_hbm)``: element-wise time of one micro-batch on the slowest stage."""
    spec, L = inp.spec, inp.layout
    per_layer = elementwise_layer_bytes_per_token(spec, seq=inp.seq, tp=L.tp, sp=L.sequence_parallel,
                                                  flash=inp.flash_attention)
    return elementwise_time_s(tokens=L.micro_batch * inp.seq / L.cp, layers=stage_layers(spec.layers, L),
                              bytes_per_token_layer=per_layer, passes=K.elementwise_passes(SCALAR, L.recompute == "full"),
                              hbm_bytes_per_s=gpu_row(inp.gpu)[1])


def _capacity(gpu: str) -> float:
    return gpu_row(gpu)[0]


def _optimizer_s(inp: PlanInputs) -> float:
    """``28 N_shard / B_hbm`` (module docstring, item 5; :func:`commcost.analyses.plan.compose.optimizer_s`)."""

    L = inp.layout
    dense, expert = params_per_gpu(inp.spec, L)
    return optimizer_s(SCALAR, dense_params=dense, expert_params=expert, dense_ranks=L.shard_dp,
                       expert_ranks=L.expert_dp, zero=L.zero, hbm_bytes_per_s=gpu_row(inp.gpu)[1])
