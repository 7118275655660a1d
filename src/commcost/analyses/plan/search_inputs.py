"""What a search is asked: the space to enumerate, the hardware, the stack's options and what to rank by.

A module of its own so that the grid kernels (:mod:`commcost.analyses.plan.grid`,
:mod:`commcost.analyses.plan.grid_memory`) and :mod:`commcost.analyses.plan.search` read one
definition without importing each other. Validation happens here, once, before any work.
"""

from __future__ import annotations

from dataclasses import dataclass

from commcost.analyses.plan.space import SearchSpace
from commcost.core.errors import InputError
from commcost.analyses.plan.plan import check_moe_options
from commcost.core.validation import require_count
from commcost.core.validation import require_finite_positive
from commcost.workload.compute import precision_class
from commcost.workload.stacks import STACKS

__all__ = ["OBJECTIVES", "SearchInputs"]

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
    tp_comm_overlap: bool = False
    """TP collectives overlap their GEMMs (as ``plan --tp-comm-overlap``)."""
    stack: str = "auto"
    """The training stack (as ``plan --stack``); ``auto`` infers it per layout."""
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

    def __post_init__(self) -> None:

        precision_class(self.precision)
        require_count("top", self.top)
        if self.objective not in OBJECTIVES:
            raise InputError(f"unknown objective {self.objective!r} (valid: {', '.join(OBJECTIVES)})")
        require_finite_positive("price_per_gpu_hour", self.price_per_gpu_hour, allow_zero=True)
        if self.objective == "cost" and not self.price_per_gpu_hour > 0:
            raise InputError("--objective cost needs --price-per-gpu-hour (dollars per GPU-hour)")
        if self.efficiency is not None:
            require_finite_positive("efficiency", self.efficiency)
            if self.efficiency > 1:
                raise InputError(f"efficiency is a fraction of peak, at most 1, got {self.efficiency:g}")
        check_moe_options(a2a=self.a2a, fp8_dispatch=self.fp8_dispatch, moe_overlap=self.moe_overlap,
                          expert_load=self.expert_load, pp=2, vp=2)
        if self.stack not in STACKS:
            raise InputError(f"unknown stack {self.stack!r} (valid: {', '.join(STACKS)})")
