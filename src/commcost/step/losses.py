"""The losses that grow with the job: what a real step loses beyond compute, bubble, exposed communication
and the optimizer, each with its source. ``plan`` adds them to the step on one row (``xp = SCALAR``), ``search``
on numpy columns; every function is a plain formula of floats, elementwise on arrays (STYLE.md item 12).

Symbols: ``W`` the ranks of the job, ``t_c`` the step's compute (``m`` micro-batches' compute on the slowest
stage), ``H`` the data-parallel communication hidden behind compute per step (time on the wire less its exposed
part), ``sigma`` the share of the SMs a communication kernel holds, ``T_sync`` one small all-reduce over the
whole job.

1. **The slowest of W ranks** (:func:`straggler_s`). Every step ends in collectives that wait for the last rank
   (the gradient reduction, the gradient norm), so the step runs at the pace of the slowest GPU. GPUs of one SKU
   in one cluster do not run the same kernels at the same speed: Sinha et al., 'Not All GPUs Are Created Equal:
   Characterizing Variability in Large-Scale, Accelerator-Rich Systems' (SC22, arXiv 2208.11035) measured an
   average performance variation of 8% across the same-SKU GPUs of each cluster on compute-bound kernels
   (SGEMM), power management and manufacturing variation, with outliers up to 1.5x slower. Taking each rank's
   compute time as ``t_c (1 + sigma_g Z_r)``, ``Z_r`` standard normal and independent, the expected
   maximum over ``W`` ranks is at most ``sqrt(2 ln W)`` (the standard bound on the maximum of ``W`` Gaussians:
   ``E max Z_r <= sqrt(2 ln W)``), so the step loses ``t_straggler = sigma_g sqrt(2 ln W) t_c``, which grows with
   the job. ``sigma_g`` (:data:`RANK_SPEED_SIGMA`) from the 8%: a max-min spread over ``n`` draws of a Gaussian is
   about ``2 sqrt(2 ln n) sigma``, so over the paper's clusters of about ``n = 1000`` GPUs
   ``sigma_g = 0.08 / (2 sqrt(2 ln 1000)) = 0.0108``.
2. **Communication contending with compute** (:func:`contention_s`). Communication hidden behind compute still
   runs on the same GPU: its kernels hold SMs (and HBM bandwidth) the GEMMs beside them would use. With
   ``sigma`` of the SMs taken (:func:`commcost.parallel.dispatch.comm_sm_share`: DeepSeek-V3, arXiv 2412.19437
   section 3.2.2, 20 SMs for communication; NCCL's ring and tree kernels run one CTA per channel, up to
   ``NCCL_MAX_CTAS`` = 32 by default, NCCL environment variables documentation), the compute beside ``H``
   seconds of hidden communication loses ``t_contention = sigma H`` (the same bound as the overlapped expert
   all-to-all, :func:`commcost.analyses.plan.compose.ep_exposed_s`). ``H`` grows with the data-parallel group
   that crosses more nodes (slower collectives to hide).
3. **The optimizer's synchronisation** (:func:`sync_s`). Before the optimizer steps, the stacks clip the
   gradient by its global norm: one fp32 scalar all-reduced over every rank that holds a shard of the gradient
   (Megatron-Core ``megatron/core/optimizer/clip_grads.py`` ``get_grad_norm_fp32``: ``all_reduce`` of the
   ``total_norm`` over the gradient-statistics group, the whole model- and data-parallel job under the
   distributed optimizer, then ``.item()``; torchtitan ``dist_utils.clip_grad_norm_``: the norm of DTensors over
   the whole mesh, ``full_tensor()``). It sits between the last backward and the optimizer, hidden behind
   nothing: ``t_sync = n_sync T_sync(4 bytes, W)``, latency-bound, growing with ``W`` (the CommModel's
   all-reduce of :data:`SYNC_BYTES` over the job, ``n_sync`` = :data:`SYNCS_PER_STEP`).

4. **Gathers behind a host synchronisation** (:func:`host_sync_s`). A stack that synchronises the host with the
   device before each ZeRO-3 parameter all-gather cannot prefetch: the host waits for every kernel queued before
   the gather, so the gather starts only when the compute before it has ended, and the compute after it is
   launched only once the gather is issued. DeepSpeed v0.3.13 to v0.5.10 (2021-03 to 2022-01,
   ``deepspeed/runtime/zero/partition_parameters.py`` ``_allgather_param``: ``torch.cuda.synchronize()`` before
   each parameter's ``torch.distributed.all_gather``; ``stage3.py`` ``_synchronize_communication``: again after
   the handles): DeepSpeed PR #1188 (commit c0eeb69, 2021-10-31) states it, 'the async version is not async at
   all, because each all_gather calls torch.cuda.synchronize()'; PR #1453 (2022-01-20, v0.6.0) replaced the path
   (``all_gather_coalesced``, prefetch on CUDA events). The time the plan hides of those gathers is then on the
   step: ``t_host_sync = s_h H W_ag / W_dp`` (``H`` the data-parallel communication hidden, ``W_ag / W_dp`` the
   ZeRO-3 gathers' share of its wire time, ``s_h`` = 1 for such a stack,
   :attr:`commcost.workload.stacks.Stack.zero3_gather_host_sync`, else 0); what is no longer hidden no longer
   contends with compute (item 2 takes ``H - t_host_sync``). It grows with the job at a fixed batch: ZeRO-3's
   gathers move the same bytes per GPU at any ``W`` (and more latency terms), while the compute they hid behind
   shrinks as ``1/W``.

Priced elsewhere, not here: groups that share the NICs (:func:`commcost.analyses.plan.compose.nic_share`),
congestion of multi-tier fabrics with the node count (:func:`commcost.comm.topology.network_oversubscription`)
and the tiers of one collective that do not overlap fully (:data:`commcost.comm.algorithms.TIER_OVERLAP_LOSS`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["RANK_SPEED_SIGMA", "SYNC_BYTES", "SYNCS_PER_STEP", "expected_max_normal", "straggler_s",
           "contention_s", "sync_s", "host_sync_s", "step_losses", "Losses", "LOSS_NAMES"]

RANK_SPEED_SIGMA = 0.08 / (2.0 * math.sqrt(2.0 * math.log(1000.0)))
"""``sigma_g``: the spread of one rank's compute speed, a share of its compute time (module docstring, item 1):
Sinha et al. SC22's 8% average variation across ~1000 same-SKU GPUs read as a Gaussian's max-min range,
``0.08 / (2 sqrt(2 ln 1000)) = 0.0108``."""
SYNC_BYTES = 4.0
"""Bytes of the gradient-norm all-reduce: one fp32 scalar (module docstring, item 3)."""
SYNCS_PER_STEP = 1.0
"""``n_sync``: the gradient norm's all-reduce, once per step (module docstring, item 3)."""
LOSS_NAMES = ("straggler_s", "contention_s", "sync_s", "host_sync_s")
"""The loss terms, in the order of the module docstring: the keys of :class:`Losses` and of the JSON."""


def expected_max_normal(xp, ranks):
    """``sqrt(2 ln W)``: the bound on the expected maximum of ``W`` independent standard normals (0 for one
    rank). Array-safe."""
    return xp.sqrt(2.0 * xp.log(xp.maximum(ranks, 1.0)))


def straggler_s(xp, *, compute_s, ranks, sigma=RANK_SPEED_SIGMA):
    """``t_straggler = sigma_g sqrt(2 ln W) t_c`` (module docstring, item 1). Array-safe."""
    return sigma * expected_max_normal(xp, ranks) * compute_s


def contention_s(xp, *, hidden_s, sm_share):
    """``t_contention = sigma H``, ``H >= 0`` the hidden communication (module docstring, item 2). Array-safe."""
    return sm_share * xp.maximum(hidden_s, 0.0)


def sync_s(xp, *, allreduce_s, count=SYNCS_PER_STEP):
    """``t_sync = n_sync T_sync`` (module docstring, item 3); ``allreduce_s`` 0 for a job of one rank. Array-safe."""
    return count * xp.maximum(allreduce_s, 0.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class Losses:
    """The loss terms of one step, seconds (module docstring)."""

    straggler_s: float = 0.0
    """The slowest of the job's ranks (item 1)."""
    contention_s: float = 0.0
    """Compute slowed by the communication hidden beside it (item 2)."""
    sync_s: float = 0.0
    """The optimizer's gradient-norm all-reduce (item 3)."""
    host_sync_s: float = 0.0
    """ZeRO-3 gathers a stack issues behind a host synchronisation, no longer hidden (item 4)."""

    @property
    def total_s(self) -> float:
        """Their sum, what the step adds."""
        return self.straggler_s + self.contention_s + self.sync_s + self.host_sync_s

    def to_dict(self) -> dict:
        """The ``breakdown.losses`` JSON keys."""
        return {**{k: getattr(self, k) for k in LOSS_NAMES}, "total_s": self.total_s}


def host_sync_s(xp, *, hidden_s, gather_wire_s, dp_wire_s, host_sync):
    """``t_host_sync = s_h H W_ag / W_dp`` (module docstring, item 4): the ZeRO-3 gathers' share of the hidden
    data-parallel communication, on the step when the stack synchronises the host before each (``host_sync``
    ``s_h``: 1 or 0, or a boolean); 0 without data-parallel wire time. Array-safe."""
    share = xp.where(dp_wire_s > 0, gather_wire_s / xp.maximum(dp_wire_s, 1e-300), 0.0)
    return xp.where(host_sync, 1.0, 0.0) * xp.maximum(hidden_s, 0.0) * xp.minimum(xp.maximum(share, 0.0), 1.0)


def step_losses(xp, *, compute_s, ranks, hidden_s, sm_share, sync_one_s, gather_wire_s=0.0, dp_wire_s=0.0,
                host_sync=False):
    """``(t_straggler, t_contention, t_sync, t_host_sync)`` of one step (module docstring): what ``plan`` and
    ``search`` add to the step, in the order of :data:`LOSS_NAMES`; the contention acts on what stays hidden,
    ``H - t_host_sync``. Array-safe."""
    t_host = host_sync_s(xp, hidden_s=hidden_s, gather_wire_s=gather_wire_s, dp_wire_s=dp_wire_s,
                         host_sync=host_sync)
    return (straggler_s(xp, compute_s=compute_s, ranks=ranks),
            contention_s(xp, hidden_s=hidden_s - t_host, sm_share=sm_share),
            sync_s(xp, allreduce_s=sync_one_s),
            t_host)
