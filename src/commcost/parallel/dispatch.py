"""Expert token dispatch and combine as the stack runs them: NCCL all-to-all, or node-aware (DeepEP).

Symbols: ``T`` tokens a rank dispatches per micro-batch and MoE layer, ``k`` experts per token
(top-k), ``h`` hidden size, ``q`` bytes per element on the wire, ``I`` the load imbalance (the busiest
rank's tokens over the mean; :attr:`commcost.analyses.plan.plan.PlanInputs.expert_load`), ``e`` the EP group,
``g`` its ranks per node, ``n = ceil(e / g)`` the nodes it spans, ``E`` routed experts.
``S = T k h q I`` is the all-to-all buffer of one rank (each token copied to each of its k experts;
shared experts compute on the rank that holds the token and send nothing).

* **nccl** (Megatron-Core's ``alltoall`` dispatcher): one all-to-all of ``S`` over the EP group, priced
  by the CommModel as it prices every all-to-all (a pairwise exchange: ``(g-1)/e S`` over NVLink,
  ``(e-g)/e S`` through the NICs when the group leaves the node).
* **deepep** (DeepEP's normal kernels, Megatron-Core's ``flex`` dispatcher; DeepSeek-V3 report,
  arXiv 2412.19437 section 3.2.2): a token bound for experts on another node crosses the network
  **once per destination node**, to the GPU of the same local index there, which forwards it over
  NVLink to the GPUs holding its experts; the network and NVLink parts run at the same time. With
  the experts spread evenly (``E/n`` per node) and routing uniform, a token hits a given node with
  probability ``p_hit = 1 - C(E - E/n, k) / C(E, k)``, so it reaches ``n_hit = n p_hit`` distinct nodes
  (:func:`nodes_hit`), ``(n-1) p_hit`` of them remote. The network part is an all-to-all among the ``n``
  same-index GPUs (one per node) of ``S_net = T h q I n_hit`` (each sends ``(n-1)/n S_net = T h q I
  (n-1) p_hit`` bytes through its NIC, against ``T h q I k (n-1)/n`` for NCCL); the NVLink part an
  all-to-all among the node's ``g`` ranks of one copy per token and destination **rank** (DeepEP's
  ``get_dispatch_layout``/``is_token_in_rank``: a token whose k experts share a rank is sent to it
  once, and the combine reduces a rank's expert outputs before sending one copy back), so of
  ``S_nvl = T h q I r_hit`` with ``r_hit = nodes_hit(E, k, e)`` the distinct ranks of the EP group
  one token's experts lie on (the same draw as for nodes, with ``E/e`` experts per rank; ``r_hit <= k``).
  ``T_deepep = max(T_a2a(S_nvl, g, g), T_a2a(S_net, n, 1))``; inside one node (``n = 1``) one
  all-to-all of ``S_nvl`` over the ``e`` ranks (NCCL's all-to-all sends every (token, expert) copy: ``S``).
* **fp8 dispatch** (DeepEP's ``use_fp8`` dispatch, DeepSeek-V3 section 3.3.2): the forward dispatch
  carries ``q = 1 + 4/128`` bytes per element (e4m3 plus one fp32 scale per 128 elements); the combine
  and both backward transfers stay bf16 (``q = 2``).

Every function takes the CommModel's price of one all-to-all as ``price(op, size, group,
ranks_per_node)`` (``plan`` passes the model's, ``search`` its memoised :class:`~commcost.analyses.plan.grid.Pricer`);
:func:`nodes_hit` is array-safe (STYLE.md item 12).
"""

from __future__ import annotations

from commcost.comm.collectives import Collective
from commcost.core.errors import InputError
from commcost.core.xp import SCALAR
from commcost.hardware import lookup
from commcost.hardware.registry import kernels

__all__ = ["A2A_KINDS", "FP8_DISPATCH_BYTES", "DISPATCH_SMS", "nodes_hit", "a2a_part_columns", "a2a_parts", "a2a_one_s",
           "check_a2a", "comm_sm_share"]

A2A_KINDS = ("nccl", "deepep")
"""``--a2a`` values."""
FP8_DISPATCH_BYTES = 1.0 + 4.0 / 128.0
"""Bytes per element of an fp8 dispatch: one e4m3 byte plus a 4-byte scale per 128 elements (DeepEP)."""


DISPATCH_SMS = 20.0
"""Streaming multiprocessors an all-to-all kernel occupies while it runs beside compute: DeepSeek-V3
(arXiv 2412.19437 section 3.2.2) dedicates 20 of the H800's 132 SMs to dispatch and combine; DeepEP's
``Buffer.num_sms`` defaults to 20."""


def comm_sm_share(gpu: str) -> float:
    """``sigma = 20 / SMs``: the share of the GPU's SMs an overlapped all-to-all takes from the compute it
    hides behind (:data:`DISPATCH_SMS`; SMs from ``hardware/kernels.json``)."""

    return DISPATCH_SMS / float(lookup(kernels()["gpus"], gpu, "GPU (kernels.json)")["sms"])


def check_a2a(kind: str) -> str:
    """``kind`` if it is one of :data:`A2A_KINDS`."""
    if kind not in A2A_KINDS:
        raise InputError(f"unknown all-to-all {kind!r} (valid: {', '.join(A2A_KINDS)})")
    return kind


def nodes_hit(xp, *, experts: int, top_k: int, nodes):
    """``n_hit = n (1 - C(E - E/n, k) / C(E, k))``: distinct nodes one token's ``k`` experts lie on, the
    ``E`` experts spread evenly over ``n`` nodes and the ``k`` drawn uniformly without replacement
    (module docstring). ``C(E - E/n, k) / C(E, k) = prod_{i<k} (E - E/n - i) / (E - i)``. Array-safe in ``nodes``."""
    miss = 1.0
    per_node = experts / nodes
    for i in range(int(top_k)):
        miss = miss * xp.maximum(0.0, experts - per_node - i) / (experts - i)
    return nodes * (1.0 - miss)


def a2a_part_columns(xp, kind: str, *, size_bytes, group, ranks_per_node, experts: int, top_k: int):
    """The all-to-alls one dispatch (or combine) of buffer ``S = size_bytes`` may run, all at once, as
    ``(size, group, ranks per node, runs)`` (module docstring): nccl, ``((S, e, g, True),)``; deepep
    ``((S r_hit / k, e or g, g, True), (S n_hit / k, n, 1, n > 1))``: the NVLink part over the whole
    group inside one node (``n = 1``), over the node's ``g`` ranks otherwise, and the network part where
    the group spans ``n = ceil(e / g) > 1`` nodes. Array-safe in ``size_bytes, group, ranks_per_node``."""
    g = xp.minimum(ranks_per_node, group)
    if kind == "nccl":
        return ((size_bytes, group, g, True),)
    n = -(-group // g)
    cross = n > 1
    per_rank = size_bytes * nodes_hit(xp, experts=experts, top_k=top_k, nodes=group) / top_k
    per_node = size_bytes * nodes_hit(xp, experts=experts, top_k=top_k, nodes=n) / top_k
    return ((per_rank, xp.where(cross, g, group), g, True), (per_node, n, 1, cross))


def a2a_parts(kind: str, *, size_bytes: float, group: int, ranks_per_node: int, experts: int,
              top_k: int) -> tuple[tuple[float, int, int], ...]:
    """The ``(size, group, ranks per node)`` of the parts of :func:`a2a_part_columns` that run, on one
    layout: nccl, ``((S, e, g),)``; deepep inside one node, ``((S r_hit / k, e, g),)``; across ``n > 1``
    nodes ``((S r_hit / k, g, g), (S n_hit / k, n, 1))``."""
    return tuple((S, P, r) for S, P, r, runs in a2a_part_columns(
        SCALAR, kind, size_bytes=size_bytes, group=group, ranks_per_node=ranks_per_node, experts=experts,
        top_k=top_k) if runs)


def a2a_one_s(price, kind: str, *, size_bytes: float, group: int, ranks_per_node: int, experts: int,
              top_k: int) -> float:
    """Seconds of one dispatch or combine: the slowest of :func:`a2a_parts`, each priced by
    ``price(Collective.ALL_TO_ALL, size, group, ranks_per_node)`` (0 for a group of one)."""
    out = 0.0
    for S, P, r in a2a_parts(kind, size_bytes=size_bytes, group=group, ranks_per_node=ranks_per_node,
                             experts=experts, top_k=top_k):
        if P > 1 and S > 0:
            out = max(out, price(Collective.ALL_TO_ALL, S, P, r))
    return out
