"""What a search is asked: the space to enumerate, the hardware, the stack's options and what to rank by.

A module of its own so that the grid kernels (:mod:`commcost.analyses.plan.grid`,
:mod:`commcost.analyses.plan.grid_memory`) and :mod:`commcost.analyses.plan.search` read one
definition without importing each other. Validation happens here, once, before any work.
"""

from __future__ import annotations

from dataclasses import dataclass

from commcost.analyses.plan.advice import MEMORY_HEADROOM  # re-exported: search's default headroom
from commcost.analyses.plan.space import SearchSpace, stack_refusal
from commcost.core.errors import InputError
from commcost.analyses.plan.plan import check_offload, check_run_options
from commcost.core.validation import require_count
from commcost.core.validation import require_finite_positive
from commcost.parallel.layout import DEFAULT_ORDER
from commcost.workload.memory import ACTIVATION_BYTES, GRAD_BYTES
from commcost.workload.memory import memory_fragile, memory_high_bytes  # re-exported: the headroom rule
from commcost.workload.stacks import KNOWN_STACKS

__all__ = ["OBJECTIVES", "SearchInputs", "MEMORY_HEADROOM", "memory_high_bytes", "memory_fragile"]



OBJECTIVES = ("step", "tokens-per-gpu", "cost")
"""``--objective`` values."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchInputs:
    """A search: the space, the hardware and what to rank by."""

    space: SearchSpace
    """What is enumerated."""
    gpu: str
    """GPU preset that computes."""
    precision: str = "bf16"
    """GEMM precision."""
    efficiency: float | None = None
    """Compute efficiency eta; None: compute.json's default."""
    flash_attention: bool = True
    """Attention runs a flash kernel."""
    activation_bytes: float = ACTIVATION_BYTES
    """Bytes per activation element on the wire (as :attr:`commcost.analyses.plan.plan.PlanInputs.activation_bytes`)."""
    grad_bytes: float = GRAD_BYTES
    """Bytes per gradient element reduced across data parallel (as ``PlanInputs.grad_bytes``)."""
    order: str = DEFAULT_ORDER
    """Rank order, innermost first (as ``plan --order``): where every group of every layout is placed."""
    tp_comm_overlap: bool = False
    """TP collectives overlap their GEMMs (as ``plan --tp-comm-overlap``)."""
    stack: str = "auto"
    """The training stack (as ``plan --stack``); ``auto`` infers it per layout."""
    stack_from_auto: bool = False
    """``stack`` is what ``auto`` resolved a part of the space to (:func:`commcost.analyses.plan.search.search_passes`):
    no stack was named, so memory's low end takes the leanest known kernels (``plan`` with ``--stack auto``)."""
    compiled: bool = False
    """torch.compile fuses element-wise chains (as ``plan --compile``)."""
    fp8_attention: bool = False
    """Attention in fp8 too (as ``plan --fp8-attention``)."""
    a2a: str = "nccl"
    """Expert dispatch (as ``plan --a2a``)."""
    fp8_dispatch: bool = False
    """fp8 dispatch (as ``plan --fp8-dispatch``)."""
    moe_overlap: str = "none"
    """Expert all-to-all overlap (as ``plan --moe-overlap``); layouts that cannot run it are not enumerated."""
    expert_load: float = 1.0
    """Load imbalance ``I`` (as ``plan --capacity-factor`` / ``--moe-imbalance``)."""
    objective: str = "step"
    """One of :data:`OBJECTIVES`."""
    price_per_gpu_hour: float = 0.0
    """Dollars per GPU-hour (objective ``cost``)."""
    top: int = 10
    """Configurations returned, best first."""
    keep_points: bool = False
    """Keep every feasible configuration's ``(step, memory, W)`` (for the Pareto plot)."""
    train_tokens: float | None = None
    """Tokens of a training run to cost for each result (:mod:`commcost.analyses.plan.training_cost`); None: not costed."""
    headroom: float = MEMORY_HEADROOM
    """``h``: share of the card a layout leaves free at the upper end of its memory, or it is fragile
    (:func:`commcost.workload.memory.memory_fragile`)."""
    fragile_last: bool = True
    """Rank every fragile layout after every layout that is not (the default ranking); False: by the
    objective alone (``--rank step``/``cost``), fragile layouts flagged but not moved."""
    cpu_offload_layers: int = 0
    """``N`` layers' activations offloaded to host memory (as ``plan --cpu-offload-layers``); Megatron-Core runs it
    only without a pipeline and without recomputation, so the space must fix ``pp=1`` and ``recompute=none``."""

    defaults_note: str = ""
    """One line on the defaults assumed for what the user did not give (a MoE search with no stack or recipe flag:
    :func:`commcost.cli.inputs_plan.search_moe_inputs`); empty: none."""

    def __post_init__(self) -> None:

        check_run_options(precision=self.precision, order=self.order, efficiency=self.efficiency, a2a=self.a2a,
                          fp8_dispatch=self.fp8_dispatch, moe_overlap=self.moe_overlap, expert_load=self.expert_load,
                          pp=2, vp=2)
        require_count("top", self.top)
        if self.objective not in OBJECTIVES:
            raise InputError(f"unknown objective {self.objective!r} (valid: {', '.join(OBJECTIVES)})")
        require_finite_positive("price_per_gpu_hour", self.price_per_gpu_hour, allow_zero=True)
        if self.objective == "cost" and not self.price_per_gpu_hour > 0:
            raise InputError("--objective cost needs --price-per-gpu-hour (dollars per GPU-hour)")
        if self.stack not in KNOWN_STACKS:
            raise InputError(f"unknown stack {self.stack!r} (valid: {', '.join(KNOWN_STACKS)})")
        if not 0.0 <= self.headroom < 1.0:
            raise InputError(f"memory headroom is a share of the card in [0, 1), got {self.headroom:g}")
        if self.cpu_offload_layers:
            fixed = dict(self.space.fixed)
            if fixed.get("pp") != 1 or fixed.get("recompute") != 0:
                raise InputError("--cpu-offload-layers runs only without a pipeline and without recomputation "
                                 "(Megatron-Core): add --fix pp=1,recompute=none")
            check_offload(self.cpu_offload_layers, gpu=self.gpu, layers=self.space.spec.layers, pp=1,
                          recompute="none")
        refusal = stack_refusal(self.stack, self.space.fixed)
        if refusal:
            raise InputError(refusal)
