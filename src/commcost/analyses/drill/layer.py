"""Comm-to-compute ratio of one transformer layer under data parallelism.

Symbols: ``h`` hidden size, ``s`` sequence length, ``b`` micro-batch (sequences),
``k`` micro-batches per optimizer step, ``D = b s k`` tokens per rank per
optimizer step, ``F`` achieved FLOP/s per GPU, other symbols as in
:mod:`commcost.comm.collectives`.

* layer parameters ``N_l = 12 h^2``; gradient ``S_l = N_l * bytes_per_grad``
* comm: all-reduce of ``S_l`` once per optimizer step, from the CommModel (flat link: the
  ring ``T_l = 2(P-1)a + 2(P-1)/P * S_l/B``)
* compute: ``C_l = (6 N_l D + 12 h s D) / F`` (dense + attention, see
  :mod:`commcost.workload.shape`)
* ratio ``T_l / C_l``. Dropping latency and attention,
  ``T_l / C_l ~ [2(P-1)/P * 12h^2 * bytes / B] / [6 * 12h^2 * D / F]
  = 2(P-1)/P * bytes * F / (6 D B)``, computed as ``W_l F / (6 N_l D)`` from the all-reduce's
  bandwidth term ``W_l`` (the same on a flat link, and defined on any model): ``h`` cancels, so the ratio is set by the
  tokens each rank processes per optimizer step, not by the model's width.
* verdict: the layer's all-reduce can hide when ``T_l <= W_l = f_b C_l / k``: with
  gradient accumulation under ``no_sync`` only the last micro-batch's backward
  overlaps the all-reduce (as in :mod:`commcost.analyses.drill.budget` part (c) and
  :mod:`commcost.step.timeline`), so accumulation cuts the ratio ``T_l / C_l`` by ``k``
  but not the window the all-reduce must fit in. At least
  ``max(0, T_l - W_l)`` stays exposed per optimizer step. The tokens per rank per
  micro-batch that make it fit are ``D*_mb = T_l F / (f_b (72 h^2 + 12 h s))``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from commcost.comm.collectives import CollectiveCost
from commcost.core.units import TERA
from commcost.core.limits import MAX_GPUS, MAX_SEQ
from commcost.core.validation import require_at_most, require_count, require_finite_positive, require_fraction
from commcost.workload.shape import gradient_bytes, transformer_layer_params, transformer_layer_train_flops

if TYPE_CHECKING:
    from commcost.comm.model import CommModel

__all__ = ["DEFAULT_ACHIEVED_FLOPS_PER_S", "LayerInputs", "LayerRatio", "layer_ratio"]

DEFAULT_ACHIEVED_FLOPS_PER_S = 400 * TERA
"""400 TFLOP/s achieved per GPU: ~40% MFU of an H100 SXM's 989 TFLOP/s dense bf16."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerInputs:
    """One transformer layer in a data-parallel group (SI units)."""

    gpus: int
    """Ranks P."""
    comm: CommModel
    """What prices the layer's all-reduce (flat link, fabric or calibrated profile)."""
    hidden: int
    """Hidden size h."""
    seq: int
    """Sequence length s, tokens."""
    micro_batch: int = 1
    """Sequences per micro-batch per rank, b."""
    grad_accum: int = 1
    """Micro-batches per optimizer step, k."""
    achieved_flops_per_s: float = DEFAULT_ACHIEVED_FLOPS_PER_S
    """Achieved FLOP/s per GPU, F."""
    bytes_per_grad: int = 2
    """Bytes per gradient element."""
    backward_fraction: float = 2.0 / 3.0
    """Share f_b of compute in the backward pass."""

    def __post_init__(self) -> None:
        # the CLI's bounds (FLAG_BOUNDS: --gpus, --hidden, --seq, --micro-batch, --grad-accum)
        for name, most in (("gpus", MAX_GPUS), ("hidden", 10**6), ("seq", MAX_SEQ), ("micro_batch", 10**6),
                           ("grad_accum", 10**6), ("bytes_per_grad", 64)):
            require_count(name, getattr(self, name))
            require_at_most(name, getattr(self, name), most)
        require_finite_positive("achieved_flops_per_s", self.achieved_flops_per_s)
        require_fraction("backward_fraction", self.backward_fraction)


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerRatio:
    """Result of :func:`layer_ratio`."""

    params: int
    """``N_l = 12 h^2``."""
    grad_bytes: float
    """``S_l``, bytes."""
    tokens_per_rank: int
    """``D = b s k`` per optimizer step."""
    allreduce: CollectiveCost
    """``T_l``."""
    dense_flops: float
    """``6 N_l D``."""
    attention_flops: float
    """``12 h s D``."""
    compute_s: float
    """``C_l``, seconds."""
    comm_to_compute: float
    """``T_l / C_l``."""
    width_free_ratio: float
    """``2(P-1)/P * bytes * F / (6 D B)``: the same ratio without latency and attention."""
    tokens_to_hide: float
    """``D*_mb``: tokens per rank per micro-batch at which ``T_l = W_l`` (the last micro-batch's backward)."""
    backward_window_s: float
    """``W_l = f_b C_l / k``: the last micro-batch's backward, the only time the all-reduce can overlap."""
    exposed_lower_bound_s: float
    """``max(0, T_l - W_l)``: all-reduce time no overlap can hide, per optimizer step."""
    verdict: Literal["HIDES", "COMMUNICATION-BOUND", "NO COMMUNICATION"]
    """``HIDES`` when ``T_l <= W_l``."""


def layer_ratio(inp: LayerInputs) -> LayerRatio:
    """Comm-to-compute ratio of one layer (see the module docstring)."""
    P, h, s = inp.gpus, inp.hidden, inp.seq
    n_l = transformer_layer_params(h)
    S_l = gradient_bytes(n_l, inp.bytes_per_grad)
    D = inp.micro_batch * s * inp.grad_accum
    T = inp.comm.cost("all_reduce", S_l, P)
    dense, attention = transformer_layer_train_flops(h, s, D)
    F = inp.achieved_flops_per_s
    compute_s = (dense + attention) / F
    flops_per_token = 6.0 * n_l + 12.0 * h * s
    window_s = inp.backward_fraction * compute_s / inp.grad_accum
    if T.total_s == 0:
        verdict: Literal["HIDES", "COMMUNICATION-BOUND", "NO COMMUNICATION"] = "NO COMMUNICATION"
    else:
        verdict = "HIDES" if T.total_s <= window_s else "COMMUNICATION-BOUND"
    return LayerRatio(
        params=n_l, grad_bytes=S_l, tokens_per_rank=D, allreduce=T,
        dense_flops=dense, attention_flops=attention, compute_s=compute_s,
        comm_to_compute=T.total_s / compute_s,
        width_free_ratio=T.bandwidth_s * F / (6.0 * n_l * D),
        tokens_to_hide=T.total_s * F / (inp.backward_fraction * flops_per_token),
        backward_window_s=window_s, exposed_lower_bound_s=max(0.0, T.total_s - window_s),
        verdict=verdict,
    )
