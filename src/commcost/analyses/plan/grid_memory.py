"""The memory of every configuration: :func:`commcost.workload.memory.memory_per_gpu` over numpy columns, built per
structural row from the same array-safe kernels it calls (:func:`commcost.workload.memory.model_state_bytes`,
:func:`~commcost.workload.memory.layer_activation_bytes`, :func:`~commcost.workload.memory.in_flight_layers`,
:func:`~commcost.workload.memory.stage_activation_bytes`, :func:`~commcost.workload.memory.buffer_bytes`) and gathered
per configuration (``tests/analyses/plan/test_search_equals_plan.py`` pins it to ``plan``'s)."""

from __future__ import annotations
from commcost.analyses.plan.space import RECOMPUTE
from commcost.analyses.plan.space import Choices
from commcost.hardware.registry import gpu_row
from commcost.parallel.zero import zero3_units
from commcost.workload.compute import precision_class
from commcost.workload.memory import device_bytes_range, fits_on_card, memory_fragile
from commcost.workload.memory import GRAD_BYTES
from commcost.workload.memory import layer_dense_params
from commcost.workload.memory import fp8_weight_cache_bytes
from commcost.workload.memory import gathered_stage_bytes
from commcost.workload.nccl_memory import nccl_buffer_bytes
from commcost.workload.nccl_memory import nvls_capable
from commcost.workload.memory import recompute_working_bytes
from commcost.workload.memory import WEIGHT_BYTES
from commcost.workload.memory import buffer_bytes
from commcost.workload.memory import gemm_input_bytes
from commcost.workload.memory import in_flight_layers
from commcost.workload.memory import largest_matrix_params
from commcost.workload.memory import layer_mix_bytes, leanest_saved_kwargs, saved_dispatch_copies, stack_saved_kwargs
from commcost.workload.memory import model_state_bytes
from commcost.workload.memory import selective_kept
from commcost.workload.memory import stage_activation_bytes
from commcost.workload.offload import resident_layers
from commcost.workload.stacks import AUTO_STACKS, auto_kinds, implied_stack, recipe_tp_comm_overlap
from commcost.workload.stacks import stack

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.analyses.plan.search_inputs import SearchInputs

__all__ = ["memory_tables", "memory_grid", "offloaded_bytes", "stack_column", "stack_value", "tp_overlap_column"]


def memory_tables(base: dict, X: dict, inp: SearchInputs) -> dict:
    """:func:`commcost.workload.memory.memory_per_gpu` (its module docstring) per structural row, in the three parts
    that depend on one categorical choice each: model states by stack and ZeRO stage (``states[stack][z]``), activations by
    (SP, recomputation) (``act[3 sp + rc]``), buffers by (SP, ZeRO-3, gathered stage) (``buf[3 sp + z3 + gathered]``); ``X`` is
    :func:`structure` of ``base``."""
    import numpy as np

    spec, s = inp.space.spec, inp.space.seq
    t, p, v, c, b, m = (base[k].astype(float) for k in ("t", "p", "v", "c", "b", "m"))
    per_stage, dense, expert = X["per_stage"], X["dense"], X["expert"]
    D, E_dp = X["D"].astype(float), X["E_dp"].astype(float)
    states = _state_tables(inp, X, t)
    s_local = s / c
    first_layers = resident_layers(in_flight_layers(layers=per_stage * p, pp=p, vp=v, micro_batches=m),
                                   inp.cpu_offload_layers)
    layer_params = (dense + expert) / zero3_units(per_stage)       # a ZeRO-3 unit's parameters
    buf = []
    acts, spread = _activation_tables(inp, base, first_layers, per_stage)
    for flag in (0, 1):
        for z3 in (0, 1, 2):     # 2: ZeRO-3 with the stage gathered through the step (memory_per_gpu)
            buf.append(buffer_bytes(np, pp=p, micro_batch=b, seq_local=s_local, hidden=spec.hidden, tp=t,
                                    zero3=bool(z3), gathered=z3 == 2, layer_params=layer_params,
                                    sequence_parallel=bool(flag),
                                    weight_bytes=WEIGHT_BYTES, grad_bytes=GRAD_BYTES,
                                    top_k=spec.top_k if spec.is_moe else 0.0, expert_load=inp.expert_load,
                                    live_params=stack_value(inp, "zero3_live_params"),
                                    reduce_bucket_params=stack_value(inp, "zero3_reduce_bucket_params"),
                                    largest_params=largest_matrix_params(spec, t)))
    # memory_per_gpu: the stage gathered under PP, weights and gradients as the stack keeps them under ZeRO-3
    q_acc = stack_column(Choices.every_row(len(t), zero=3), base, inp, "grad_bytes")
    unshard = sum(sum(gathered_stage_bytes(n, ranks, q_acc, WEIGHT_BYTES)) for n, ranks in ((dense, D), (expert, E_dp)))
    nccl = {name: nccl_buffer_bytes(np, world=base["W"].astype(float), tp=t, cp=c, dp=base["d"].astype(float), pp=p,
                                    ep=base["e"].astype(float), gpus_per_node=inp.space.gpus_per_node,
                                    nvls=nvls_capable(inp.gpu),
                                    extra_groups=stack(name, compiled=inp.compiled).nccl_extra_groups)
            for name in _stacks(inp)}
    return dict(states={k: np.array(v) for k, v in states.items()}, act={k: np.array(v) for k, v in acts.items()},
                spread={k: np.array(v) for k, v in spread.items()}, buf=np.array(buf),
                unshard=unshard, nccl=nccl)


def _state_tables(inp: SearchInputs, X: dict, t) -> dict[str, list]:
    """:func:`memory_tables`' model states, ``{stack: [bytes at ZeRO 0, 1, 2, 3]}`` per structural row (weights,
    gradients at the stack's main-gradient bytes, optimizer; fp8 weight caches kept under ZeRO < 3)."""
    spec, per_stage, dense, expert = inp.space.spec, X["per_stage"], X["dense"], X["expert"]
    D, E_dp = X["D"].astype(float), X["E_dp"].astype(float)
    states: dict[str, list] = {}
    fp8 = precision_class(inp.precision) != "bf16"
    for name in _stacks(inp):
        st = stack(name, compiled=inp.compiled)
        q_g = st.main_grad_bytes
        cache = (fp8_weight_cache_bytes(per_stage * layer_dense_params(spec) / t, fp8, st)
                 + fp8_weight_cache_bytes(expert, fp8, st))          # memory_per_gpu: kept under ZeRO < 3
        for z in range(4):
            w_d, g_d, o_d = model_state_bytes(dense, z, D, grad_bytes=q_g)
            w_e, g_e, o_e = model_state_bytes(expert, z, E_dp, grad_bytes=q_g)
            states.setdefault(name, []).append(w_d + g_d + o_d + w_e + g_e + o_e + (cache if z < 3 else 0.0))
    return states


def _activation_tables(inp: SearchInputs, base: dict, first_layers, per_stage) -> tuple[dict, dict]:
    """``(act, spread)`` of :func:`memory_tables`: per stack, the activations and
    :attr:`commcost.workload.memory.MemoryBreakdown.working_spread_bytes` in rows ``3 sp + rc``."""
    import numpy as np

    spec, flash = inp.space.spec, inp.flash_attention
    t, p, c, b, m = (base[k].astype(float) for k in ("t", "p", "c", "b", "m"))
    s_local = inp.space.seq / c
    acts: dict[str, list] = {}
    spread: dict[str, list] = {}
    lean = leanest_saved_kwargs(spec) if inp.stack == "auto" or inp.stack_from_auto else None   # not stack_named
    for name in _stacks(inp):
        st = stack(name, compiled=inp.compiled)
        q_in = gemm_input_bytes(st, precision_class(inp.precision) != "bf16")
        act = acts.setdefault(name, [])
        for flag in (0, 1):
            layer = lambda rc, saved=None: _stage_layer_bytes(spec, s_local, b, t, bool(flag), flash, rc, q_in, st,  # noqa: E731
                                                              base["e"], inp.a2a, saved)
            none = layer("none")
            for rname in RECOMPUTE:
                kept = selective_kept(st.selective) if rname == "selective" else rname
                working, spread_bytes = recompute_working_bytes(none, rname == "full")   # as memory_per_gpu
                kw = dict(pp=p, micro_batches=m, first_layers=first_layers, held_layers=per_stage, seq_local=s_local,
                          micro_batch=b, hidden=spec.hidden, tp=t, sequence_parallel=bool(flag), vocab=spec.vocab,
                          dropout=spec.dropout, loss_bytes_per_vocab=st.loss_bytes_per_vocab)
                a = stage_activation_bytes(np, layer_bytes=layer(kept), working_bytes=working, **kw)[0]
                if lean is not None:
                    lean_working, _ = recompute_working_bytes(layer("none", lean), rname == "full")
                    spread_bytes = spread_bytes + a - stage_activation_bytes(
                        np, layer_bytes=layer(kept, lean), working_bytes=lean_working, **kw)[0]
                spread.setdefault(name, []).append(spread_bytes * np.ones_like(none))
                act.append(a)
    return acts, spread


def _stacks(inp: SearchInputs) -> tuple[str, ...]:
    """The stacks a search prices: the one given, or under ``auto`` every one a layout can imply."""
    return AUTO_STACKS if inp.stack == "auto" else (inp.stack,)


def stack_masks(cols: Choices, base: dict, inp: SearchInputs) -> dict:
    """``{stack: boolean column}``: which rows each stack prices (:func:`commcost.workload.stacks.resolve_stack`'s rule)."""
    import numpy as np

    if inp.stack != "auto":
        return {inp.stack: np.ones(len(cols.bi), dtype=bool)}

    out: dict = {}
    for (name, _), on in rate_masks(cols, base, inp).items():
        out[name] = on | out[name] if name in out else on
    return out


def stack_column(cols: Choices, base: dict, inp: SearchInputs, attribute: str):
    """A stack field per row, read from ``stacks.json``: each row takes the value of the stack that prices it
    (:func:`stack_masks`). One value, not a column, when every stack the
    search prices has the same (a named stack, or both of ``auto``'s agreeing)."""
    values = {name: getattr(stack(name, compiled=inp.compiled), attribute) for name in _stacks(inp)}
    first = next(iter(values.values()))
    if all(v == first for v in values.values()):
        return first
    import numpy as np

    out = None
    for name, mask in stack_masks(cols, base, inp).items():
        out = np.where(mask, values[name], values[name] if out is None else out)
    return out


def stack_value(inp: SearchInputs, attribute: str):
    """A stack field the grid uses as one switch for the whole search (:func:`stack_column` without rows): the
    value every stack the search prices has. Raises if they differ, where the grid needs it as a column."""
    values = {name: getattr(stack(name, compiled=inp.compiled), attribute) for name in _stacks(inp)}
    first = next(iter(values.values()))
    if any(v != first for v in values.values()):
        raise ValueError(f"stacks {', '.join(values)} differ in {attribute!r}: the grid must take it per row")
    return first


def rate_masks(cols: Choices, base: dict, inp: SearchInputs) -> dict:
    """``{(stack, auto kind or None): boolean column}``: :func:`stack_masks` with ``--stack auto``'s Megatron-Core rows
    split by :func:`commcost.workload.stacks.auto_kind` (each kind's kernels at its ``auto_sustained`` fraction)."""
    if inp.stack != "auto":
        return {(inp.stack, None): stack_masks(cols, base, inp)[inp.stack]}
    bi = cols.bi
    kinds = auto_kinds(cols.zero, base["t"][bi], base["p"][bi], base["c"][bi])
    return {(implied_stack(kind), kind): on for kind, on in kinds.items()}


def tp_overlap_column(cols: Choices, base: dict, inp: SearchInputs):
    """TP communication overlap of every configuration: as asked (``inp.tp_comm_overlap``), or under ``--stack auto``
    where the stack each row implies (:func:`stack_masks`) runs it in its published recipes (``stacks.json``
    ``recipe_tp_comm_overlap``; :func:`commcost.workload.recipes.dense_recipe_defaults` for ``plan``'s one row).
    One value for a named stack (:func:`commcost.analyses.plan.search.search_passes` sets it)."""
    if inp.stack != "auto" or inp.tp_comm_overlap:
        return inp.tp_comm_overlap
    import numpy as np

    out = np.zeros(len(cols.bi), dtype=bool)
    for name, mask in stack_masks(cols, base, inp).items():
        if recipe_tp_comm_overlap(name):
            out = out | mask
    return out & (base["t"][cols.bi] > 1)



def memory_grid(cols: Choices, tables: dict, inp: SearchInputs, base: dict) -> dict:
    """``memory_bytes, states_bytes, activations_bytes`` of every configuration (gathered from
    :func:`memory_tables`; the peak allocated's high end), its low end ``memory_low_bytes``
    (:attr:`commcost.workload.memory.MemoryBreakdown.allocated_bytes`), the low end of what the card holds
    ``device_low_bytes`` and its high end ``device_high_bytes`` (:func:`commcost.workload.memory.device_bytes_range`,
    as :attr:`~commcost.workload.memory.MemoryBreakdown.device_bytes`), the high end of NCCL's
    buffers ``nccl_high_bytes`` (:func:`commcost.workload.memory.nccl_buffer_bytes`), the GPU's
    ``capacity_bytes``, and the verdicts plan's :class:`~commcost.workload.memory.MemoryBreakdown` gives: ``fits``
    (:func:`commcost.workload.memory.fits_on_card`) and ``fragile``, short of ``inp.headroom``
    (:func:`commcost.workload.memory.memory_fragile`)."""

    import numpy as np

    bi, sp, zero = cols.bi, cols.sp, cols.zero
    masks = stack_masks(cols, base, inp)
    states = np.zeros(len(bi))
    for name, mask in masks.items():
        states = np.where(mask, tables["states"][name][zero, bi], states)


    gathered = stack_column(cols, base, inp, "zero3_unshard_under_pp") & (zero == 3) & (base["p"][bi] > 1)
    if np.any(gathered):
        states = states + np.where(gathered, tables["unshard"][bi], 0.0)

    act, spread, nccl_low, nccl_high = (np.zeros(len(bi)) for _ in range(4))
    for name, mask in masks.items():
        act = np.where(mask, tables["act"][name][3 * sp + cols.rc, bi], act)
        spread = np.where(mask, tables["spread"][name][3 * sp + cols.rc, bi], spread)
        nccl_low = np.where(mask, tables["nccl"][name][0][bi], nccl_low)
        nccl_high = np.where(mask, tables["nccl"][name][1][bi], nccl_high)
    buffers = tables["buf"][3 * sp + (zero == 3).astype(int) + gathered, bi]

    total = states + act + buffers
    low = total - spread        # MemoryBreakdown.allocated_bytes[0]: the recompute working set's low end
    device_low, device_high = device_bytes_range(total, (nccl_low, nccl_high), spread)   # MemoryBreakdown.device_bytes
    capacity = gpu_row(inp.gpu)[0]
    return dict(memory_bytes=total, memory_low_bytes=low, device_low_bytes=device_low, device_high_bytes=device_high,
                nccl_high_bytes=nccl_high, states_bytes=states, activations_bytes=act, capacity_bytes=capacity,
                fits=fits_on_card(device_low, capacity),                            # MemoryBreakdown.fits
                fragile=memory_fragile(total, capacity, inp.headroom, nccl_high))  # MemoryBreakdown.fragile


def offloaded_bytes(cols: Choices, base: dict, inp: SearchInputs):
    """``N A`` of every configuration: the activation bytes one micro-batch offloads to host memory
    (:attr:`commcost.workload.memory.MemoryBreakdown.offloaded_bytes`; 0 without ``cpu_offload_layers``)."""
    import numpy as np

    bi, sp = cols.bi, cols.sp
    out = np.zeros(len(bi))
    if not inp.cpu_offload_layers:
        return out
    spec, flash, s = inp.space.spec, inp.flash_attention, inp.space.seq
    t, c, b = (base[k][bi].astype(float) for k in ("t", "c", "b"))
    for name, mask in stack_masks(cols, base, inp).items():
        st = stack(name, compiled=inp.compiled)
        q_in = gemm_input_bytes(st, precision_class(inp.precision) != "bf16")
        for flag in (0, 1):
            per = _stage_layer_bytes(spec, s / c, b, t, bool(flag), flash, "none", q_in, st, base["e"][bi], inp.a2a)
            out = np.where(mask & (sp == flag), inp.cpu_offload_layers * per, out)
    return out


def _stage_layer_bytes(spec, s_local, b, t, sp, flash, recompute, q_in, st, e, a2a, saved=None):
    """:func:`commcost.workload.memory.stage_layer_bytes` with array ``s_local, b, t, e`` (``st`` the stack; ``saved``
    what its kernels keep, by default the stack's: :func:`commcost.workload.memory.stack_saved_kwargs`)."""
    import numpy as np

    kw = dict(dispatch_copies=saved_dispatch_copies(np, top_k=spec.top_k, ep=e, a2a=a2a), seq_local=s_local, micro_batch=b, hidden=spec.hidden, heads=spec.heads, kv_heads=spec.n_kv,
              qk_head_dim=spec.d_qk, head_dim=spec.d, gated=spec.gated_mlp, tp=t, sequence_parallel=sp,
              dropout=spec.dropout, flash=flash, gemm_input_bytes=q_in, **(saved or stack_saved_kwargs(st, spec)))

    return layer_mix_bytes(spec, kw, recompute)
