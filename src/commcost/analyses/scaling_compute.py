"""The compute and memory a scaling curve of a registry model takes from ``plan``.

A registry model (``--model llama2-7b``) has no ``t_c`` of its own. Without ``--compute-ms``, ``t_c`` is
what :func:`commcost.analyses.plan.plan.plan` prices for one micro-batch of ``seq`` tokens on one GPU of the
system (``dp = tp = pp = 1``, ``--stack auto``): its compute by operator, no communication, no optimizer (the
scaling analysis keeps its own serial overhead ``t_o``). The fixed per-GPU batch of the scaling analysis makes
this ``t_c`` the same at every ``N``.

Memory of pure data parallelism (every rank holds every model state, ZeRO-0): ``16 N`` bytes of mixed-precision
Adam states (:func:`commcost.workload.memory.ddp_memory_per_gpu`) against the GPU's memory, the same at every
point; it is a lower bound (activations come on top), so "fits" means the states fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from commcost.analyses.plan.plan import PlanInputs, plan
from commcost.parallel.layout import Layout
from commcost.workload.memory import ddp_memory_per_gpu, gpu_capacity_bytes
from commcost.workload.transformer import model_spec

__all__ = ["PlanCompute", "plan_compute", "StatesMemory", "states_memory"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanCompute:
    """``t_c`` of a registry model from ``plan``."""

    compute_s: float
    """Compute of one micro-batch on one GPU, seconds."""
    source: str
    """What was priced, in words."""


def plan_compute(model: str, gpu: str, gpus_per_node: int, seq: int, comm) -> PlanCompute:
    """``t_c``: :func:`commcost.analyses.plan.plan.plan`'s compute of one micro-batch (module docstring)."""
    layout = Layout(dp=1, tp=1, pp=1, micro_batch=1, global_batch=1)
    p = plan(PlanInputs(spec=model_spec(model), layout=layout, seq=seq, gpu=gpu, gpus_per_node=gpus_per_node), comm)
    return PlanCompute(compute_s=p.compute_s,
                       source=(f"t_c from plan: {model}, one micro-batch of 1 x {seq:,} tokens on one {gpu} "
                               f"(stack {p.stack}, compute by operator)"))


@dataclass(frozen=True, slots=True, kw_only=True)
class StatesMemory:
    """Model states of pure data parallelism against the GPU (module docstring)."""

    states_bytes: float
    """``16 N``, bytes."""
    capacity_bytes: float
    """The GPU's memory, bytes."""

    @property
    def fits(self) -> bool:
        """``16 N <= capacity`` (a lower bound: activations come on top)."""
        return self.states_bytes <= self.capacity_bytes


def states_memory(params: float, gpu: str) -> StatesMemory:
    """:class:`StatesMemory` of ``params`` on ``gpu``."""
    return StatesMemory(states_bytes=ddp_memory_per_gpu(params), capacity_bytes=gpu_capacity_bytes(gpu))
