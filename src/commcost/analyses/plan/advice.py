"""What a plan would change, as data: the memory options that fit where the plan does not (:class:`MemoryOption`)
and the term of the step worth attacking first (:class:`Hint`). :mod:`commcost.report.plan` words them; nothing
here formats or prints.

A memory option is every ZeRO stage above the plan's and every recomputation, alone and together, that brings the
plan's memory within the GPU with search's headroom to spare (:meth:`commcost.workload.memory.MemoryBreakdown.fragile`:
what search would not call fragile), before any tp or pp change. A hint names the largest of the pipeline bubble and
each dimension's exposed communication when it is over 5% of the step, and the change the layout suggests for it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from commcost.analyses.plan.plan import plan_memory

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.analyses.plan.plan import Plan

__all__ = ["MemoryOption", "Hint", "HINT_SHARE", "memory_options", "step_hint", "MEMORY_HEADROOM"]

MEMORY_HEADROOM = 0.05
"""``h``: the share of the card a layout must leave free at the upper end of its memory estimate
(:func:`commcost.workload.memory.memory_fragile`), or it is fragile and ranked after every layout that leaves it. The upper
end already holds the caching allocator's 15% over the peak allocated, the CUDA context and NCCL's
buffers (:data:`commcost.workload.memory.ALLOCATOR_SLACK`, ``CONTEXT_BYTES``; the layout's
:func:`commcost.workload.nccl_memory.nccl_buffer_bytes`); the
headroom is for what that estimate misses: fragmentation that grows over a run (PyTorch's CUDA
memory notes: blocks that cannot be split or merged keep ``reserved`` above ``allocated``; the
``expandable_segments`` setting exists to curb it), memory spikes of the first steps and of
checkpointing, and the memory model's own error (docs/plan.md: median |error| 1.9% on 27 runs that
publish ``max_memory_reserved``). 5% of an 80 GB card is 4 GB."""
HINT_SHARE = 0.05
"""A term is worth a hint when it is more than this share of the step."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryOption:
    """One change of ZeRO stage or recomputation (or both) under which the plan's memory fits."""

    zero: int | None
    """The ZeRO stage it moves to (None: the plan's)."""
    recompute: str | None
    """The recomputation it turns on (None: the plan's)."""
    total_bytes: float
    """Bytes per GPU with the change."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Hint:
    """The largest avoidable term of the step and what would shrink it."""

    term: str
    """``bubble`` (the pipeline bubble) or the dimension (``tp``, ``dp``, ``ep``, ...) whose exposed communication
    it is."""
    share: float
    """Its share of the step."""
    change: str | None
    """``more_virtual_stages`` (with :attr:`next_vp`), ``tp_inside_domain``, ``lower_tp``, ``dp_buckets``,
    ``ep_inside_domain``, ``fewer_ranks_across_nodes``, or None (nothing to suggest: a bubble without a pipeline)."""
    next_vp: int = 0
    """With ``more_virtual_stages``: the virtual stages that halve the bubble (``2 vp``)."""
    tp_comm_overlap: bool = False
    """With ``lower_tp``: the plan already overlaps TP with the GEMMs (so that is not suggested)."""


def memory_options(p: Plan) -> tuple[MemoryOption, ...]:
    """Every :class:`MemoryOption` of ``p`` (module docstring), ZeRO stages first."""
    L = p.inputs.layout
    zeros = [z for z in (1, 2, 3) if z > L.zero and L.grad_dp > 1]
    # Megatron-Core does not recompute while it offloads activations (commcost.workload.offload): no recompute option
    recomputes = [] if p.inputs.cpu_offload_layers else [
        r for r in ("selective", "full") if r != L.recompute and not (L.recompute == "full")]
    changes: list[tuple[int | None, str | None]] = [(z, None) for z in zeros]
    changes += [(None, r) for r in recomputes]
    changes += [(z, r) for z in zeros for r in recomputes]
    out: list[MemoryOption] = []
    for zero, recompute in changes:
        if zero is not None and recompute is not None and any(o.zero == zero and o.recompute is None for o in out):
            continue  # the stage fits alone: recomputing as well only costs time
        change = {k: v for k, v in (("zero", zero), ("recompute", recompute)) if v is not None}
        m2 = plan_memory(replace(p.inputs, layout=replace(L, **change)))
        if m2.fits and not m2.fragile(MEMORY_HEADROOM):  # as search ranks
            out.append(MemoryOption(zero=zero, recompute=recompute, total_bytes=m2.total_bytes))
    return tuple(out)


def step_hint(p: Plan) -> Hint | None:
    """The :class:`Hint` of ``p``, or None when no term is over :data:`HINT_SHARE` of the step."""
    L = p.inputs.layout
    terms = {"bubble": p.pipeline_bubble_s, **p.exposed_by_dimension()}
    term, worst = max(terms.items(), key=lambda kv: kv[1])
    if not worst > HINT_SHARE * p.step_s:
        return None
    share = worst / p.step_s
    if term == "bubble":
        return Hint(term=term, share=share, change="more_virtual_stages" if L.pp > 1 else None, next_vp=2 * L.vp)
    name = term.upper()   # a dimension's advice by its name: TP (and expert TP), then DP, then EP
    if "TP" in name:
        spread = any(line.comm.dimension == "tp" and line.comm.ranks_per_node < line.comm.group_size
                     for line in p.comm)
        return Hint(term=term, share=share, change="tp_inside_domain" if spread else "lower_tp",
                    tp_comm_overlap=p.inputs.tp_comm_overlap)
    change = "dp_buckets" if "DP" in name else "ep_inside_domain" if "EP" in name else "fewer_ranks_across_nodes"
    return Hint(term=term, share=share, change=change)
