"""Training stacks as data: what Megatron, NeMo, DeepSpeed, torchtitan and FSDP stacks run.

Each stack in ``hardware/stacks.json`` (with its source) says which attention kernel it calls, how
many HBM accesses its element-wise operators make (fused kernels or eager PyTorch composites), what
its selective recomputation recomputes, how ZeRO-3 gathers parameters, and the bytes it keeps per
gradient element. ``auto`` (the default) picks the stack a layout implies, the one whose published recipes run
that layout (``stacks.json`` ``_auto_stacks``, with the sources): ZeRO-3 without tensor, pipeline or context
parallelism is how FSDP stacks run (``fsdp``); ZeRO-3 with any of them is FSDP2 composed with TP, PP or CP,
torchtitan's recipe (``torchtitan``); everything else is priced as Megatron-Core (``megatron``: DDP or its
distributed optimizer beside TP, PP and CP), each with that stack's behaviour but the sustained fraction of every
published run of its kind,
whatever stack ran it (``auto_sustained`` in ``stacks.json``: a user who names no stack gets the fraction
the runs of that layout sustain, not the fastest stack's). Every plan names the stack it used and why.

Each stack's ``layouts`` entry says which parallel layouts it runs at all (:class:`StackLayouts`: its ZeRO
stages, with and without a pipeline or model parallelism, and whether it runs TP, PP, interleaving, CP,
EP and sequence parallelism), each with its source; ``commcost search --stack NAME`` enumerates only
those (:func:`layout_runs`, applied to whole columns), ``auto`` every layout.

Stored as differences (``stacks.json`` ``_stacks``): today's releases state every key of :class:`Stack`; a past release
names its ``base`` and only the keys that differ, each with its own source; :func:`stack_row` resolves it. Every stack
name comes from the file (:data:`STACKS`, :data:`PAST_RELEASES`); none is written in code.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache

from commcost.core.errors import InputError
from commcost.hardware import load_preset_file, lookup
from commcost.parallel.layout import Recompute
from commcost.workload.published_layouts import PublishedLayout, published_layouts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.parallel.layout import Layout

__all__ = ["STACKS", "PAST_RELEASES", "KNOWN_STACKS", "Stack", "stack", "resolve_stack", "auto_is_fsdp", "AUTO_KINDS", "auto_kinds", "auto_kind", "StackLayouts",
           "stack_layouts", "layout_runs", "stack_refuses", "layout_refusal", "PublishedLayout", "published_layouts",
           "stacks_running", "AUTO_STACKS", "stack_family", "stack_row", "STACK_KEYS", "auto_masks", "auto_runs_implied",
           "recipe_tp_comm_overlap", "implied_stack"]

@lru_cache(maxsize=1)
def _table() -> dict:
    return load_preset_file("stacks.json")


def _rows() -> dict:
    return _table()["stacks"]


STACKS = ("auto", *(name for name, row in _rows().items() if "base" not in row))
"""``--stack`` values: ``auto`` and the stacks as they are released today (the rows of ``stacks.json`` with no
``base``, in the file's order)."""

PAST_RELEASES = tuple(name for name, row in _rows().items() if "base" in row)
"""Earlier releases that published runs used (the rows of ``stacks.json`` that name a ``base``: each says only how
it differs from it). The library, the accuracy benchmarks and ``--stack`` accept them so that old runs are priced
and searched as they ran (a user on that release can paste the advice); the sensitivity table offers only
:data:`STACKS`, the stacks a search names (:func:`stacks_running`) list them after today's."""

KNOWN_STACKS = STACKS + PAST_RELEASES
"""Every stack ``stacks.json`` describes."""


def _unknown(name: str) -> InputError:
    return InputError(f"unknown stack {name!r} (valid: {', '.join(KNOWN_STACKS)})")


def stack_family(name: str) -> str:
    """The release of today that ``name`` descends from (its ``base``, followed to a row without one): the stacks
    that share one training loop, and so one fitted ``u_stack``."""
    rows = _rows()
    if name not in rows:
        raise _unknown(name)
    while "base" in rows[name]:
        name = rows[name]["base"]
    return name


def stack_row(name: str) -> dict:
    """Stack ``name``'s row with its ``base`` resolved: the base's keys, then the release's own over them; its
    ``layouts`` likewise key by key (``stacks.json`` ``_stacks``). ``source`` is the release's own; ``base`` and
    ``sources`` (the per-key sources) are dropped."""
    rows = _rows()
    if name not in rows:
        raise _unknown(name)
    own = rows[name]
    if "base" not in own:
        return dict(own)
    base = stack_row(own["base"])
    out = {**base, **{k: v for k, v in own.items() if k not in ("base", "sources", "layouts")}}
    out["layouts"] = {**base["layouts"], **own.get("layouts", {})}
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Stack:
    """One stack's behaviour (``hardware/stacks.json``).

    Every field is required, and this is the one place that lists them (:data:`STACK_KEYS`): today's releases
    state every key in ``stacks.json``, a past release takes its ``base``'s for the keys it does not give
    (:func:`stack_row`), and :func:`stack` refuses a row that lacks one, so no key is ever silently defaulted.
    ``name`` and ``compiled`` come from the call, not the file."""

    name: str
    """Registry key."""
    attention_kernel: str
    """``fa3`` (cuDNN / FlashAttention-3 class where the GPU has it), ``fa2`` or ``triton`` (FlashAttention in
    Triton: llm-foundry's ``attn_impl: triton``, :data:`commcost.workload.operators.ATTENTION_KERNELS`)."""
    norm_accesses: float
    """HBM element accesses per element of a norm's input (2: one fused read and write)."""
    activation_accesses_gated: float
    """Accesses per element of f of a gated activation (SwiGLU), reads of gate and up included."""
    activation_accesses: float
    """Accesses per element of f of a plain activation (GeLU)."""
    rotary_accesses: float
    """Accesses per element of Q and K of the rotary embedding."""
    loss_accesses_per_vocab: float
    """Accesses per token and vocabulary entry of the logits' cross-entropy, forward."""
    selective: str
    """What selective recomputation recomputes: ``attention`` (the attention core),
    ``alternate_matmul`` (every other matmul's forward and every element-wise forward) or
    ``attention_module`` (the attention block: QKV and output projections and the core)."""
    zero3_gathers_per_layer: int
    """All-gathers ZeRO-3 issues per layer and pass (FSDP: 1 per wrapped block)."""
    grad_bytes: float
    """Bytes per gradient element held (fp32 main gradients: 4)."""
    loss_bytes_per_vocab: float
    """Bytes per token and vocabulary entry the loss holds at its peak (logits and the cross-entropy's buffers)."""
    fp8_weight_cast_per_micro_batch: bool
    """fp8 recipes cast the weights every micro-batch (torchao) rather than once a step (Transformer Engine)."""
    zero2_scatter_per_micro_batch: bool
    """ZeRO-2 reduce-scatters the gradients after every micro-batch's backward (DeepSpeed stage 2, FSDP
    ``SHARD_GRAD_OP``), where Megatron's distributed optimizer keeps full gradients until the last."""
    zero3_unshard_under_pp: bool
    """Under pipeline parallelism ZeRO-3 keeps each stage's parameters gathered for the step and reduces
    gradients once, on the last backward (torchtitan's FSDP2 with PP): one gather and one scatter per
    layer and step, the stage's weights and gradients held unsharded."""
    zero3_gather_host_sync: bool
    """Each ZeRO-3 parameter all-gather first synchronises the host with the device (DeepSpeed v0.3.13 to
    v0.5.10), so the gathers cannot hide behind compute (:func:`commcost.step.losses.host_sync_s`)."""
    fp8_saves_inputs: bool
    """fp8 recipes save each GEMM's quantized input for the weight gradient (Transformer Engine), halving it."""
    sustained: float
    """``u_stack``: the share of the kernels' benchmark rates this stack's training loop sustains
    (fitted: :mod:`commcost.workload.operators`)."""
    compiled: bool
    """torch.compile fuses the element-wise chains (accesses as fused kernels)."""
    main_grad_bytes: float
    """``q_g`` of the memory model: bytes per parameter of the gradients the stack holds for the optimizer
    (Megatron-Core's fp32 ``main_grad`` buffer: 4; FSDP stacks' fp32 sharded gradients come with fp32 sharded
    parameters in place of the master copy, which totals as 2 + 2 + 12: 2)."""
    gated_mlp_saved_bytes: float
    """Bytes a gated MLP keeps per element of its width besides the down projection's input: 6 eager
    (gate and up outputs, SiLU's output), 4 with a fused SwiGLU that saves only its input (Megatron-Core)."""
    norm_saved_bytes: float
    """Bytes each norm keeps per element of h besides its output: 2 (the bf16 input; fused norms), 6 where an eager
    RMSNorm upcasts (HF transformers' ``LlamaRMSNorm``: the fp32 copy of its input, 4, and the bf16 normalized tensor
    the weight multiplies, 2)."""
    rotary_saved_copies: float
    """Extra copies of Q and K an unfused rotary embedding keeps: 2 for ``q * cos + rotate_half(q) * sin`` (the
    pre-rotary tensor and its ``rotate_half``), 0 with a fused rotary kernel."""
    zero3_live_params: float | None
    """ZeRO-3's bound on the gathered parameters resident at once (DeepSpeed's ``stage3_max_live_parameters``);
    None: the two-layer prefetch window (FSDP's, Megatron-FSDP's) alone (:func:`commcost.workload.memory.buffer_bytes`)."""
    zero3_reduce_bucket_params: float | None
    """ZeRO-3's gradient bucket, parameters (DeepSpeed's ``reduce_bucket_size``); None: one layer's gradients."""
    compile_covers_loss: bool
    """torch.compile also compiles the loss (its accesses and bytes as a fused kernel's); False where the stack
    compiles the model's blocks only and the cross-entropy runs eager (torchtitan before 0.1)."""
    tp_overlap_per_gemm: bool
    """With TP communication overlap, each collective runs beside the one GEMM it is fused with, micro-pipelined
    (PyTorch's async TP: :func:`commcost.workload.operators.tp_partner_gemms_s`); False: beside a quarter of the
    layer's pass (:data:`commcost.analyses.plan.compose.TP_OVERLAP_SHARE`), Transformer Engine's userbuffers,
    which also overlap the backward's collectives in bulk with the other gradient GEMM."""
    fp8_weight_cache_bytes: float
    """``q_8``: bytes per layer parameter an fp8 recipe keeps cast across the micro-batches of a step (Transformer
    Engine's fp8 weight and its transpose, 1 + 1, cached on the first micro-batch: 2); 0 where the weights are cast
    anew in every forward (torchao)."""
    nccl_extra_groups: tuple[str, ...]
    """Process groups beyond one per parallel dimension that the stack runs collectives on, each an NCCL
    communicator (:func:`commcost.workload.nccl_memory.nccl_buffer_bytes`): Megatron-Core's second data-parallel
    group, its model-parallel group and the default group (``dp``, ``mp``, ``world``)."""
    source: str
    """Where the numbers come from."""


STACK_KEYS = tuple(f.name for f in fields(Stack) if f.name not in ("name", "compiled"))
"""The keys a stack's resolved row in ``stacks.json`` gives: every field of :class:`Stack` but ``name`` and
``compiled``."""


@lru_cache(maxsize=32)
def stack(name: str, *, compiled: bool = False, auto_kind: str | None = None) -> Stack:
    """The :class:`Stack` ``name`` (not ``auto``), with ``compiled`` taking torch.compile's fused accesses;
    ``auto_kind`` (:func:`auto_kind`): ``name`` is what ``--stack auto`` resolved to, and its ``sustained`` is
    ``stacks.json`` ``auto_sustained[auto_kind]``, the median over every published run of that kind of layout
    (module docstring)."""
    row = {k: v for k, v in stack_row(name).items() if k != "layouts"}
    missing = sorted(set(STACK_KEYS) - set(row))
    extra = sorted(set(row) - set(STACK_KEYS))
    if missing or extra:
        raise InputError(f"stacks.json {name}: " + "; ".join(
            ([f"missing {', '.join(missing)} (today's releases state every key)"] if missing else [])
            + ([f"unknown {', '.join(extra)}"] if extra else [])))
    row["nccl_extra_groups"] = tuple(row["nccl_extra_groups"])
    if compiled:
        loss_keys = () if row["compile_covers_loss"] else ("loss_accesses_per_vocab", "loss_bytes_per_vocab")
        row.update({k: v for k, v in _table()["compiled"].items() if k != "source" and k not in loss_keys})
    if auto_kind is not None:
        row["sustained"] = float(lookup(_table()["auto_sustained"], auto_kind, "auto kind (stacks.json auto_sustained)"))
    return Stack(name=name, compiled=compiled, **row)


def recipe_tp_comm_overlap(name: str) -> bool:
    """Whether stack ``name``'s published recipes run TP communication overlap (``PlanInputs.tp_comm_overlap``;
    ``stacks.json`` ``recipe_tp_comm_overlap``, with its source): ``commcost search`` prices its layouts with it on,
    as a user of those recipes runs them."""
    return bool(_table().get("recipe_tp_comm_overlap", {}).get(name, False))


def resolve_stack(name: str, layout: Layout) -> tuple[str, str]:
    """``(stack, why)``: ``name`` itself, or for ``auto`` the stack the layout implies."""
    if name not in KNOWN_STACKS:
        raise InputError(f"unknown stack {name!r} (valid: {', '.join(KNOWN_STACKS)})")
    if name != "auto":
        return name, "given (--stack)"
    implied = implied_stack(kind := auto_kind(layout.zero, layout.tp, layout.pp, layout.cp))
    why = {"fsdp": "auto: ZeRO-3 without TP, PP or CP is how FSDP stacks run",
           "torchtitan": "auto: FSDP2 with TP, PP or CP is torchtitan's layout"}.get(kind, "auto: a Megatron-Core layout")
    masks = _layout_masks(tuple(_layout_columns(layout).items()))
    if not masks["auto"]:
        other = next((s for s in STACKS[1:] if masks[s]), None)
        refusal = (layout_refusal(implied, layout) or "").replace(f"--stack {implied} does not", "does not")
        refusal = refusal.replace(" (hardware/stacks.json)", "")
        if other is not None:
            return other, (f"auto: {implied} {refusal}; {other} runs it, priced as {other} runs it, at its own "
                           "sustained fraction (--stack to pin another)")
        return implied, f"auto: {implied} {refusal}, and no stack runs this layout: priced as {implied} (a what-if)"
    return implied, f"{why}; kernels at what published runs of it sustain, any stack (--stack to pin it)"


@lru_cache(maxsize=1024)
def _layout_masks(columns: tuple) -> dict:
    """:func:`auto_masks` of one layout's ``(name, value)`` columns, computed once per distinct layout (search
    re-plans its best layouts, each resolving ``auto`` again)."""
    return auto_masks(**dict(columns))


def _layout_columns(layout: Layout) -> dict:
    return dict(tp=layout.tp, pp=layout.pp, vp=layout.vp, cp=layout.cp, ep=layout.ep, zero=layout.zero,
                sp=int(layout.sequence_parallel), recompute=layout.recompute, micro_batches=layout.micro_batches)


def auto_masks(*, tp, pp, vp, cp, ep, zero, sp, recompute: str | None = None, micro_batches=None) -> dict:
    """Where ``--stack auto`` resolves a layout, array-safe: ``auto`` the layouts the stack auto's rule implies
    (``stacks.json`` ``auto_stacks`` per :func:`auto_kind`) runs (:func:`layout_runs`), priced as today at ``auto_sustained``;
    then, for each other of :data:`STACKS` in order, the layouts that stack is the first to run where the implied one
    does not (priced as that stack runs them, at its own sustained fraction: a layout is priced only by a stack that
    runs it); ``none`` the layouts no stack runs."""
    kw = dict(tp=tp, pp=pp, vp=vp, cp=cp, ep=ep, zero=zero, sp=sp, recompute=recompute, micro_batches=micro_batches)
    implied = _table()["auto_stacks"]
    runs: dict = {}                      # each stack's layout_runs once (the implied stacks are among STACKS)

    def runs_of(name: str):
        if name not in runs:
            runs[name] = layout_runs(stack_layouts(name), **kw)
        return runs[name]

    base = False
    for kind, on in auto_kinds(zero, tp, pp, cp).items():
        base = base | (on & runs_of(implied[kind]))
    out = {"auto": base}
    left = base ^ True
    for name in STACKS[1:]:
        out[name] = left & runs_of(name)
        left = left & (out[name] ^ True)
    out["none"] = left
    return out


def auto_runs_implied(layout: Layout) -> bool:
    """``--stack auto`` prices ``layout`` as the stack its rule implies, at ``auto_sustained`` (:func:`auto_masks`)."""
    return bool(_layout_masks(tuple(_layout_columns(layout).items()))["auto"])


def auto_is_fsdp(zero, tp, pp, cp):
    """``auto``'s rule for ``fsdp``: ZeRO-3 without TP, PP or CP (:func:`auto_kinds`).
    Array-safe (``commcost search`` applies it to columns)."""
    return (zero == 3) & (tp == 1) & (pp == 1) & (cp == 1)


AUTO_KINDS = tuple(_table()["auto_sustained"])
"""The kinds of layout ``--stack auto`` prices at a sustained fraction of their own (:func:`auto_kind`)."""

AUTO_STACKS = tuple(sorted(set(_table()["auto_stacks"].values())))
"""The stacks ``--stack auto`` resolves to (``stacks.json`` ``auto_stacks``: one per kind of layout)."""


def auto_kinds(zero, tp, pp, cp) -> dict:
    """``{kind: whether the layout is of it}`` for each of :data:`AUTO_KINDS`, the kinds of layout ``auto`` prices
    (``stacks.json`` ``auto_sustained``; each priced as its ``auto_stacks`` stack, the one whose published recipes
    run it, ``_auto_stacks``): ``fsdp`` (ZeRO-3 alone: :func:`auto_is_fsdp`), ``torchtitan`` (ZeRO-3 with
    ``t``, ``p`` or ``c > 1``: FSDP2 composed with TP, PP or CP), else ``megatron`` (ZeRO 0-2; ZeRO-2 with a
    pipeline, which Megatron-Core does not run, goes to the stack that does, :func:`auto_masks`). It reads ZeRO-3
    or not alone, as the grid's shared terms do (``grid._per_key``). Array-safe (search applies it to columns)."""
    fsdp = auto_is_fsdp(zero, tp, pp, cp)
    fsdp2_mp = (zero == 3) & ((tp > 1) | (pp > 1) | (cp > 1))
    return {"megatron": (fsdp2_mp | fsdp) ^ True, "torchtitan": fsdp2_mp, "fsdp": fsdp}


def implied_stack(kind: str) -> str:
    """The stack ``--stack auto`` prices layouts of ``kind`` (:func:`auto_kinds`) as: ``stacks.json`` ``auto_stacks``."""
    return _table()["auto_stacks"][kind]


def auto_kind(zero, tp, pp, cp) -> str:
    """The one of :func:`auto_kinds` a single layout is."""
    return next(kind for kind, on in auto_kinds(zero, tp, pp, cp).items() if on)


SEQUENCE_PARALLEL = ("optional", "always", "never")
"""What a stack does with the sequence under tensor parallelism (:attr:`StackLayouts.sequence_parallel`)."""
RECOMPUTATIONS = tuple(Recompute)
"""Activation recomputation a stack may run (:attr:`StackLayouts.recompute`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StackLayouts:
    """The parallel layouts one stack runs (``layouts`` of its row in ``hardware/stacks.json``)."""

    name: str
    """Registry key."""
    zero: tuple[int, ...]
    """ZeRO stages it runs (0 DDP, 1 optimizer states, 2 and gradients, 3 and weights sharded)."""
    zero_with_pp: tuple[int, ...]
    """Stages it runs with a pipeline (``pp > 1``)."""
    zero_with_model_parallel: tuple[int, ...]
    """Stages it runs with any of ``tp``, ``pp`` or ``cp`` above 1."""
    zero_without_pp: tuple[int, ...]
    """Stages it runs without a pipeline (``pp = 1``); ``zero`` unless ``stacks.json`` says otherwise."""
    tp: bool
    """Runs tensor parallelism."""
    pp: bool
    """Runs pipeline parallelism."""
    vp: bool
    """Runs interleaved (virtual) pipeline stages."""
    cp: bool
    """Runs ring context parallelism."""
    ep: bool
    """Runs expert parallelism."""
    sequence_parallel: str
    """With ``tp > 1``: ``optional``, ``always`` (its TP plan always shards the sequence) or ``never``."""
    source: str
    """Where the rules come from."""
    recompute: tuple[str, ...] = RECOMPUTATIONS
    """The activation recomputation it runs (``stacks.json`` ``recompute``, where given; else all three)."""
    vp_min_pp: int = 2
    """The fewest pipeline stages it interleaves (``vp > 1``) over (``stacks.json`` ``vp_min_pp``, where given)."""
    accumulation: bool = True
    """Runs gradient accumulation: several micro-batches per optimizer step without a pipeline (``stacks.json``
    ``accumulation``, where given). False: without a pipeline a step is one forward and backward of each
    data-parallel rank's local batch, ``m = B / (b d) = 1``; only a pipeline schedule splits it into micro-batches."""

    def __post_init__(self) -> None:
        if self.sequence_parallel not in SEQUENCE_PARALLEL:
            raise InputError(f"stacks.json {self.name}: sequence_parallel {self.sequence_parallel!r} is not one of "
                             f"{', '.join(SEQUENCE_PARALLEL)}")
        extra = set(self.recompute) - set(RECOMPUTATIONS)
        if extra:
            raise InputError(f"stacks.json {self.name}: recompute {sorted(extra)} is not one of {', '.join(RECOMPUTATIONS)}")
        for field_name in ("zero_with_pp", "zero_with_model_parallel", "zero_without_pp"):
            extra = set(getattr(self, field_name)) - set(self.zero)
            if extra:
                raise InputError(f"stacks.json {self.name}: {field_name} holds stages {sorted(extra)} "
                                 f"outside zero {list(self.zero)}")


@lru_cache(maxsize=16)
def stack_layouts(name: str) -> StackLayouts | None:
    """The layouts stack ``name`` runs; None for ``auto`` (every layout)."""
    if name == "auto":
        return None
    if name not in KNOWN_STACKS:
        raise _unknown(name)
    row = {k: v for k, v in stack_row(name)["layouts"].items()}
    row.setdefault("zero_without_pp", row["zero"])
    for key in ("zero", "zero_with_pp", "zero_with_model_parallel", "zero_without_pp"):
        row[key] = tuple(int(z) for z in row[key])
    if "recompute" in row:
        row["recompute"] = tuple(row["recompute"])
    return StackLayouts(name=name, **row)


def _member(value, allowed: tuple[int, ...]):
    """``value in allowed``, array-safe (an OR of equalities; False for an empty ``allowed``)."""
    out = value != value                       # False, or an all-False array of value's shape
    for a in allowed:
        out = out | (value == a)
    return out


def layout_runs(rules: StackLayouts | None, *, tp, pp, vp, cp, ep, zero, sp, recompute: str | None = None,
                micro_batches=None):
    """Whether the stack of ``rules`` runs the layout ``(tp, pp, vp, cp, ep, zero, sp)`` with ``recompute``
    (one of :data:`RECOMPUTATIONS`, or None: not asked) and ``micro_batches`` ``m = B / (b d)`` per step (None:
    not asked); every argument but ``recompute`` a number or a numpy column (the result then a boolean column).
    ``rules`` None (``auto``): always.

    ``runs = zero in Z  and (pp = 1 or zero in Z_pp) and (pp > 1 or zero in Z_1) and (tp = pp = cp = 1 or zero in Z_mp)
    and (tp = 1 or TP) and (pp = 1 or PP) and (vp = 1 or VP) and (cp = 1 or CP) and (ep = 1 or EP)
    and (vp = 1 or pp >= p_vp) and (tp = 1 or SP rule) and recompute in R and (ACC or pp > 1 or m = 1)``, with the SP
    rule ``sp`` (always), ``not sp`` (never) or true (optional), ``p_vp`` :attr:`StackLayouts.vp_min_pp`, ``R`` its
    recomputation and ``ACC`` :attr:`StackLayouts.accumulation`."""
    if rules is None:
        return (tp == tp) | True
    if recompute is not None and recompute not in rules.recompute:
        return (tp == tp) & False
    data_parallel_only = (tp == 1) & (pp == 1) & (cp == 1)
    ok = _member(zero, rules.zero) & ((pp == 1) | _member(zero, rules.zero_with_pp)) \
        & ((pp > 1) | _member(zero, rules.zero_without_pp)) \
        & (data_parallel_only | _member(zero, rules.zero_with_model_parallel))
    for degree, allowed in ((tp, rules.tp), (pp, rules.pp), (vp, rules.vp), (cp, rules.cp), (ep, rules.ep)):
        if not allowed:
            ok = ok & (degree == 1)
    if rules.vp_min_pp > 2:
        ok = ok & ((vp == 1) | (pp >= rules.vp_min_pp))
    if rules.sequence_parallel == "always":
        ok = ok & ((tp == 1) | (sp == 1))
    elif rules.sequence_parallel == "never":
        ok = ok & (sp == 0)
    if micro_batches is not None and not rules.accumulation:
        ok = ok & ((pp > 1) | (micro_batches == 1))
    return ok


def stack_refuses(rules: StackLayouts | None, fixed: dict[str, int]) -> str | None:
    """Why the stack of ``rules`` runs no layout with the ``fixed`` dimensions (``--fix``), or None."""
    if rules is None:
        return None
    if "zero" in fixed and fixed["zero"] not in rules.zero:
        return (f"--stack {rules.name} does not run ZeRO-{fixed['zero']} (it runs "
                f"{', '.join(f'ZeRO-{z}' for z in rules.zero)}; hardware/stacks.json)")
    for dim in ("tp", "pp", "vp", "cp", "ep"):
        if fixed.get(dim, 1) > 1 and not getattr(rules, dim):
            return f"--stack {rules.name} does not run {dim} > 1 (hardware/stacks.json)"
    if fixed.get("sp") == 1 and rules.sequence_parallel == "never":
        return f"--stack {rules.name} does not run sequence parallelism (hardware/stacks.json)"
    if fixed.get("vp", 1) > 1 and fixed.get("pp", rules.vp_min_pp) < rules.vp_min_pp:
        return (f"--stack {rules.name} interleaves (vp > 1) only over {rules.vp_min_pp} or more pipeline stages "
                f"(hardware/stacks.json)")
    if "recompute" in fixed and RECOMPUTATIONS[fixed["recompute"]] not in rules.recompute:
        return _recompute_refusal(rules, RECOMPUTATIONS[fixed["recompute"]])
    return None


def _recompute_refusal(rules: StackLayouts, recompute: str) -> str:
    return (f"--stack {rules.name} does not run {recompute} recomputation (it runs "
            f"{', '.join(rules.recompute)}; hardware/stacks.json)")


def layout_refusal(name: str, layout: Layout) -> str | None:
    """Why stack ``name`` does not run ``layout`` (the one line ``commcost plan --stack NAME`` refuses it with), or
    None; ``auto`` runs every layout. The library itself prices any layout under any stack (what-ifs such as
    the sensitivity table's other stacks); the command refuses what a user of that stack cannot run."""
    rules = stack_layouts(name)
    if rules is None:
        return None
    L = layout
    fixed = {"zero": L.zero, "tp": L.tp, "pp": L.pp, "vp": L.vp, "cp": L.cp, "ep": L.ep,
             "sp": int(L.sequence_parallel), "recompute": RECOMPUTATIONS.index(L.recompute)}
    first = stack_refuses(rules, fixed)
    if first:
        return first
    if layout_runs(rules, tp=L.tp, pp=L.pp, vp=L.vp, cp=L.cp, ep=L.ep, zero=L.zero, sp=int(L.sequence_parallel)):
        if layout_runs(rules, tp=L.tp, pp=L.pp, vp=L.vp, cp=L.cp, ep=L.ep, zero=L.zero, sp=int(L.sequence_parallel),
                       micro_batches=L.micro_batches):
            return None
        return (f"--stack {rules.name} does not accumulate gradients without a pipeline: each step is one forward and "
                f"backward of the local batch, micro-batch = global batch / dp = {L.global_batch} / {L.dp} = "
                f"{L.global_batch // L.dp} (--micro-batch {L.global_batch // L.dp}), not {L.micro_batch} (hardware/stacks.json)")
    if L.tp > 1 and rules.sequence_parallel == "always" and not L.sequence_parallel:
        return f"--stack {rules.name} runs tp > 1 only with sequence parallelism (--sequence-parallel; hardware/stacks.json)"
    where = ("with a pipeline (pp > 1)" if L.pp > 1 and L.zero not in rules.zero_with_pp
             else "without a pipeline (pp = 1)" if L.pp == 1 and L.zero not in rules.zero_without_pp
             else "with tp, pp or cp > 1")
    return f"--stack {rules.name} does not run ZeRO-{L.zero} {where} (hardware/stacks.json)"


def stacks_running(layout: Layout) -> tuple[str, ...]:
    """The named stacks (``hardware/stacks.json`` ``layouts``) that run ``layout`` with its recomputation and
    micro-batches,
    today's releases (:data:`STACKS` order) then the past ones (:data:`PAST_RELEASES`): a user on a past
    release learns whether it runs the layout too."""
    return tuple(name for name in KNOWN_STACKS[1:]
                 if layout_runs(stack_layouts(name), tp=layout.tp, pp=layout.pp, vp=layout.vp, cp=layout.cp,
                                ep=layout.ep, zero=layout.zero, sp=int(layout.sequence_parallel),
                                recompute=layout.recompute, micro_batches=layout.micro_batches))
