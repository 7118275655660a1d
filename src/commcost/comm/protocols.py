"""NCCL's three protocols (LL, LL128, Simple) and the constants of its tuning model.

NCCL moves data with one of three protocols and its tuner picks, per message
size, the (algorithm, protocol) pair its model says is fastest
(NVIDIA/nccl src/graph/tuning.cc, ``ncclTopoTuneModel`` and
``ncclTopoGetAlgoTime``; PyTorch ports the same model in
``torch/_inductor/comm_analysis.py``):

* **LL** (low latency): 8-byte stores carrying a 4-byte flag, so no separate
  synchronisation -- the shortest step latency, but at most half the link
  bandwidth (``busBw * 0.5``, capped at ``llMaxBw``);
* **LL128**: 128-byte lines with an 8-byte flag -- 120/128 of the bandwidth
  (``0.92``), a middle latency;
* **Simple**: bulk copies with a memory fence and a flag per step -- full
  bandwidth, the longest step latency.

So the latency-bandwidth trade-off is not one alpha and one beta but three
pairs, and the right one depends on the size: LL for small messages, LL128 in
the middle, Simple (and NVLS, which is Simple only) for large ones. This module
holds those constants, each with its place in tuning.cc (the NCCL 2.19+ table
``ncclTunerConstantsDefaults``; the ring LL128 and Simple step latencies and the
base latencies are unchanged since NCCL 2.12). :mod:`commcost.comm.algorithms` applies
them to a :class:`commcost.comm.topology.Topology` that carries a
:class:`ProtocolModel` (every real system preset does); a flat
:class:`commcost.comm.topology.Link` and a custom topology without one keep the
drill's single alpha-beta pair.

How the constants meet commcost's own numbers: a fabric's ``step_latency_s`` is
the per-step latency of NCCL's *ring LL128* (hwLat[NVLINK or NET][RING][LL128] =
1.9 us or 4.0 us), and a system's ``base_latency_s`` is ring Simple's baseLat
(8.4 us). Every other (algorithm, protocol) latency is that anchor times NCCL's
ratio, so a fabric with a slower step (EFA, the seeds) keeps its own scale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from commcost.core.errors import InputError
from commcost.core.units import US
from commcost.core.validation import require_count, require_finite_positive

__all__ = [
    "Protocol", "ProtocolTerms", "ProtocolModel", "RING_TERMS", "TREE_TERMS", "NVLS_TERMS",
    "REFERENCE_INTRA_STEP_S", "REFERENCE_INTER_STEP_S", "REFERENCE_BASE_S",
    "RING_SIMPLE_MULTINODE_LATENCY_FACTOR", "RING_SIMPLE_MULTINODE_LATENCY_FACTOR_VOLTA", "ring_simple_plateau_factor",
    "tree_correction", "PER_CHANNEL_MAX_BUS_BANDWIDTH_GB_PER_S", "RING_SEARCH_SPEEDS_GB_PER_S",
    "RING_SEARCH_MAX_CHANNELS", "one_node_ring_graph", "TREE_LL128_ONE_NODE_EFFICIENCY",
    "RING_SIMPLE_ONE_NODE_EFFICIENCY",
]


class Protocol(StrEnum):
    """NCCL's wire protocols (``NCCL_PROTO``)."""

    LL = "ll"
    LL128 = "ll128"
    SIMPLE = "simple"


@dataclass(frozen=True, slots=True, kw_only=True)
class ProtocolTerms:
    """One (algorithm family, protocol) cell of NCCL's tuning model, in NCCL's own units turned SI."""

    protocol: Protocol
    """Which protocol."""
    base_latency_s: float
    """NCCL ``baseLat[algorithm][protocol]``: fixed cost of one collective, seconds."""
    intra_step_latency_s: float
    """NCCL ``hwLat[NVLINK][algorithm][protocol]``: one step over NVLink, seconds."""
    inter_step_latency_s: float
    """NCCL ``hwLat[NET][algorithm][protocol]``: one step over the network, seconds."""
    bandwidth_efficiency: float
    """Fraction of the link's achievable bandwidth the protocol reaches (NCCL's bus-bandwidth refinements)."""

    def __post_init__(self) -> None:
        for name in ("base_latency_s", "intra_step_latency_s", "inter_step_latency_s"):
            require_finite_positive(name, getattr(self, name), allow_zero=True)
        if not 0 < self.bandwidth_efficiency <= 1:
            raise InputError(f"bandwidth_efficiency must be in (0, 1], got {self.bandwidth_efficiency:g}")


# NCCL src/graph/tuning.cc, ncclTunerConstantsDefaults (2.19+):
#   baseLatencies  Tree {6.8, 14.0, 8.4}  Ring {6.6, 14.0, 8.4}        (LL, LL128, Simple; us)
#   hwLatencies    NVLINK Tree {.6, 1.25, 4.0}  Ring {.6, 1.9, 3.4}  NVLS {0, 0, 25}
#                  NET    Tree {5.0, 8.5, 14}   Ring {2.7, 4.0, 14.0} NVLSTree {0, 0, 14}
#   bandwidth      Ring LL: busBw * .5 (capped at llMaxBw); Ring LL128: busBw * 0.92 (120/128);
#                  Tree: busBw * .92, then LL: / 3.8, LL128: * 120/128 (7/9 in one node)
RING_TERMS: tuple[ProtocolTerms, ...] = (
    ProtocolTerms(protocol=Protocol.LL, base_latency_s=6.6 * US, intra_step_latency_s=0.6 * US,
                  inter_step_latency_s=2.7 * US, bandwidth_efficiency=0.5),
    ProtocolTerms(protocol=Protocol.LL128, base_latency_s=14.0 * US, intra_step_latency_s=1.9 * US,
                  inter_step_latency_s=4.0 * US, bandwidth_efficiency=0.92),
    ProtocolTerms(protocol=Protocol.SIMPLE, base_latency_s=8.4 * US, intra_step_latency_s=3.4 * US,
                  inter_step_latency_s=14.0 * US, bandwidth_efficiency=1.0),
)
"""Ring (and the ring-like step algorithms commcost adds: halving-doubling, hierarchical, direct)."""

TREE_TERMS: tuple[ProtocolTerms, ...] = (
    ProtocolTerms(protocol=Protocol.LL, base_latency_s=6.8 * US, intra_step_latency_s=0.6 * US,
                  inter_step_latency_s=5.0 * US, bandwidth_efficiency=0.92 / 3.8),
    ProtocolTerms(protocol=Protocol.LL128, base_latency_s=14.0 * US, intra_step_latency_s=1.25 * US,
                  inter_step_latency_s=8.5 * US, bandwidth_efficiency=0.92 * 120 / 128),
    ProtocolTerms(protocol=Protocol.SIMPLE, base_latency_s=8.4 * US, intra_step_latency_s=4.0 * US,
                  inter_step_latency_s=14.0 * US, bandwidth_efficiency=0.92),
)
"""Double binary tree (NCCL ``NCCL_ALGO_TREE``)."""

TREE_LL128_ONE_NODE_EFFICIENCY = 0.92 * 7 / 9
"""Tree LL128 inside one node: NCCL uses 7/9 instead of 120/128."""

RING_SIMPLE_ONE_NODE_EFFICIENCY = 350.0 / 370.0
"""``e_s``: the share of NCCL's NVLink bandwidth a ring under Simple reaches inside one NVSwitch node (every ring
collective: all-gather, reduce-scatter, all-reduce, broadcast, reduce).

NCCL's tuner prices ring Simple at the full bandwidth of the ring its search finds (tuning.cc
``busBw = graphs[a]->nChannels * bw``, with no protocol factor for Simple, where LL gets ``* .5`` and LL128
``* 0.92``), and commcost's ``B_i`` is the same number (NCCL's per-link ``SM90_NVLINK_BW`` = 20.6 GB/s x 18 =
370 GB/s on H100). Measured one-node rings on H100 stay below it: NVIDIA/nccl#1281 (nccl-tests on H100:
reduce_scatter 360 GB/s, all_gather 350 GB/s of bus bandwidth) and NVIDIA/nccl#1506 (H100, 1 GB all-gather,
ring 350 GB/s); ``e_s`` = the median of the three, 350, over 370 = 0.946. None of these runs is a scored table:
the Vultr B200 one-node tables (all_gather 672, reduce_scatter 695 GB/s of 720 at 16 GiB), the H100
reduce-scatter of NVIDIA/nccl#1047 (358 of 370 at 4 GiB) and the A100/GB200 ring all-reduce rows check it.
Only where commcost models NCCL's one-node ring search (:func:`one_node_ring_graph`: NVIDIA GPUs on an
NVSwitch); LL and LL128 keep NCCL's own factors and caps."""

NVLS_TERMS = ProtocolTerms(protocol=Protocol.SIMPLE, base_latency_s=0.0, intra_step_latency_s=1.9 * US,
                           inter_step_latency_s=14.0 * US, bandwidth_efficiency=1.0)
"""NVLS / NVLS tree, Simple only. NCCL sets its latency to hwLat[NVLINK][NVLS] (no baseLat) plus
14 us per network step (hwLat[NET][NVLSTree][SIMPLE]). commcost keeps the preset's own in-switch
step latency (its ``in_network_step_latency_s``, two steps), so the intra entry is the reference
(no scaling), the launch term is 0 and the network step is scaled by 14/4."""

REFERENCE_INTRA_STEP_S = 1.9 * US
"""hwLat[NVLINK][RING][LL128]: what a fabric's ``step_latency_s`` stands for on the intra tier."""
REFERENCE_INTER_STEP_S = 4.0 * US
"""hwLat[NET][RING][LL128]: what a fabric's ``step_latency_s`` stands for on the inter tier."""
REFERENCE_BASE_S = 8.4 * US
"""baseLat[RING][SIMPLE]: what a system's ``base_latency_s`` stands for."""

RING_SIMPLE_MULTINODE_LATENCY_FACTOR = 1.4
"""``ncclTopoGetAlgoTime``: ring Simple all-reduce across nodes, ``lat *= 1.4`` ("plateau effect of ring", sm80+)."""
RING_SIMPLE_MULTINODE_LATENCY_FACTOR_VOLTA = 1.9
"""The same plateau factor before sm80: ``lat *= comm->minCompCap < 80 ? 1.9 : 1.4`` (NVIDIA/nccl
src/graph/tuning.cc ``ncclTopoGetAlgoTime``); applies to the ``volta`` generation (V100, sm70)."""


def ring_simple_plateau_factor(gpu_generation: str | None) -> float:
    """NCCL's ring Simple all-reduce latency factor across nodes for a GPU generation (1.9 on Volta, 1.4 after)."""
    return RING_SIMPLE_MULTINODE_LATENCY_FACTOR_VOLTA if gpu_generation == "volta" else RING_SIMPLE_MULTINODE_LATENCY_FACTOR

# ncclTopoGetAlgoTime: "Trees are not perfectly sticking to the model for medium sizes. Applying a
# static correction factor is not ideal but works quite well." Index i is a message of 64 * 2**i bytes.
_TREE_CORRECTION: dict[Protocol, tuple[float, ...]] = {
    Protocol.LL: (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0,
                  1.0, 1.0, 1.0),
    Protocol.LL128: (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9,
                     .9, 1.0, 1.0),
    Protocol.SIMPLE: (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8,
                      .9, .9),
}


def tree_correction(protocol: Protocol, message_bytes: float) -> float:
    """NCCL's tree bandwidth factor at ``message_bytes`` (tuning.cc ``treeCorrectionFactor``).

    NCCL looks the factor up at ``log2(S / 64)`` rounded down; commcost interpolates
    linearly in ``log2(S / 64)`` between the table's points instead, so the time stays
    monotone in size (a step up of the factor would make a bigger message faster).
    Past the table (S >= 256 MiB) the factor is 1: the model's own bandwidth.
    """
    table = _TREE_CORRECTION[protocol]
    if message_bytes <= 64:
        return table[0]
    x = math.log2(message_bytes / 64)
    if x >= len(table):
        return 1.0
    i = int(x)
    hi = table[i + 1] if i + 1 < len(table) else 1.0
    return table[i] + (x - i) * (hi - table[i])


# NCCL src/graph/tuning.cc, ncclTunerConstantsDefaults (as of 2.29.7; the Blackwell ring LL128 row moved:
# 2 x 36.7 = 73.4 on N1/N2/N4 in 2.25-2.28.3, N2 34.6 from 2.28.7, 34.5/34.6/34.5 in 2.29.2, 40 from 2.29.7,
# so on Blackwell the two-node LL128 cap binds from NCCL 2.28.7 on, the one-node one from 2.29.2): the most bus
# bandwidth ONE channel
# reaches, GB/s, for a group on one node, two nodes, more (N1/N2/N4). ncclTopoTuneModel caps
#   ring LL128:  busBw = min(busBw * 0.92, nChannels * perChMaxRingLL128Bw)
#   tree (all):  busBw = min(busBw * 0.92, nChannels * perChMaxTreeBw)
#   tree LL128:  busBw = min(busBw * 120/128 (7/9 in one node), nChannels * perChMaxTreeLL128Bw)
PER_CHANNEL_MAX_BUS_BANDWIDTH_GB_PER_S: dict[str, dict[str, tuple[float, float, float]]] = {
    "volta": {"ring_ll128": (20.0, 20.0, 20.0), "tree": (26.5, 18.5, 10.0), "tree_ll128": (20.0, 20.0, 20.0)},
    "ampere": {"ring_ll128": (20.0, 20.0, 20.0), "tree": (24.0, 23.6, 17.8), "tree_ll128": (20.0, 20.0, 20.0)},
    "hopper": {"ring_ll128": (36.7, 36.7, 36.7), "tree": (38.7, 41.4, 36.0), "tree_ll128": (36.7, 36.7, 29.0)},
    "blackwell": {"ring_ll128": (40.0, 40.0, 40.0), "tree": (70.0, 42.8, 24.0), "tree_ll128": (55.6, 31.67, 20.0)},
}
"""NCCL's per-channel bus-bandwidth caps by GPU generation (``perChMaxRingLL128Bws``, ``perChMaxTreeBws``,
``perChMaxTreeLL128Bws``), GB/s per channel."""


# NCCL src/graph/search.cc: the per-channel bandwidths (GB/s) the ring search tries inside one node, fastest
# first (speedArrayIntra before sm90, sm90SpeedArrayIntra, sm100SpeedArrayIntra).
_SPEEDS_PRE_SM90 = (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0)
RING_SEARCH_SPEEDS_GB_PER_S: dict[str, tuple[float, ...]] = {
    "volta": _SPEEDS_PRE_SM90,
    "ampere": _SPEEDS_PRE_SM90,
    "hopper": (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
    "blackwell": (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0),
}
"""The per-channel bandwidths NCCL's ring search tries inside one node, by GPU generation (GB/s)."""

RING_SEARCH_MAX_CHANNELS = 32
"""Most channels the ring search keeps: ``MAXCHANNELS / 2`` (src/init.cc ``ringGraph->maxChannels``)."""

_COMPUTE_CAPABILITY = {"volta": 70, "ampere": 80, "hopper": 90, "blackwell": 100}


def one_node_ring_graph(nvlink_bandwidth_bytes_per_s: float, gpu_generation: str) -> tuple[int, float]:
    """``(c, b_c)``: the channels and per-channel bandwidth of the ring NCCL's search finds in one node whose
    GPUs each reach an NVSwitch at ``B = nvlink_bandwidth_bytes_per_s``; NCCL's tuner prices every ring
    collective in that node at the bus bandwidth ``c b_c`` (tuning.cc ``busBw = graphs[a]->nChannels * bw``)
    and caps ring LL128 at ``c x perChMaxRingLL128Bw``.

    NCCL src/graph/search.cc ``ncclTopoCompute``, pass 1: from the fastest speed ``s`` of
    :data:`RING_SEARCH_SPEEDS_GB_PER_S` that fits (``s <= B``), each ring channel takes ``s`` of every GPU's
    link to the switch, so ``floor(B / s)`` channels fit (at most :data:`RING_SEARCH_MAX_CHANNELS`); the search
    keeps the best ``c s`` (``ncclTopoCompareGraphs``: strictly more replaces), stops once ``c s >= B``, and
    tries a slower speed only while it is more than 0.49 of the best one's. Then ``ncclTopoDupChannels``
    doubles the channels (at most 32) and divides ``s`` by the same factor, unless ``s < 25`` or (compute
    capability above 8.0, ``s < 50`` and more than 4 channels). Pass 2 (a faster speed on the same channels)
    never fits when ``c s`` is already the most below ``B``. Hopper, ``B`` = 370 GB/s: 6 x 60 = 360, 7 x 50,
    9 x 40, 12 x 30 = 360 (no better), doubled to 12 x 30 = 360 GB/s; Blackwell, 720 GB/s: 8 x 90 = 720,
    doubled to 16 x 45. Only for GPUs that reach every peer through an NVSwitch (the caller's check).
    """
    speeds = RING_SEARCH_SPEEDS_GB_PER_S[gpu_generation]
    total = nvlink_bandwidth_bytes_per_s / 1e9
    best_c, best_s = 0, 0.0
    for s in (x for x in speeds if x <= total):
        if best_c and s / best_s <= 0.49:
            break
        c = min(int(math.floor(total / s + 1e-9)), RING_SEARCH_MAX_CHANNELS)
        if c * s > best_c * best_s:
            best_c, best_s = c, s
        if best_c * best_s >= total:
            break
    if best_c == 0:  # slower than every speed: one channel at the link's own rate
        return 1, nvlink_bandwidth_bytes_per_s
    if best_s >= 25.0 and not (_COMPUTE_CAPABILITY[gpu_generation] > 80 and best_s < 50.0 and best_c > 4):
        doubled = min(2 * best_c, RING_SEARCH_MAX_CHANNELS)
        best_s /= -(-doubled // best_c)
        best_c = doubled
    return best_c, best_s * 1e9


@dataclass(frozen=True, slots=True, kw_only=True)
class ProtocolModel:
    """The hardware-dependent part of NCCL's protocol model for one system."""

    ll_max_bus_bandwidth_bytes_per_s: tuple[float, float, float]
    """NCCL ``llMaxBws``: the most bus bandwidth LL reaches, for a group on one node, two
    nodes, more than two (bytes/s). One node: by GPU generation; across nodes: by CPU vendor."""
    nvls_channels: int = 16
    """NVLS channels in one node (NCCL ``NCCL_NVLS_NCHANNELS``; src/transport/nvls.cc defaults:
    16 on Hopper (``NVLS_NCHANNELS_SM90``), 24 on Blackwell (``NVLS_NCHANNELS_SM100_NVL``))."""
    nvls_channels_multi_node: int | None = None
    """NVLS channels when the group spans nodes (nvls.cc: 32 on Blackwell, ``NVLS_NCHANNELS_SM100``);
    None: as ``nvls_channels``."""
    nvls_chunk_bytes: int = 128 * 1024
    """NVLS chunk per channel (NCCL ``NCCL_NVLS_CHUNKSIZE``, default 128 KiB, src/transport/nvls.cc)."""
    ll128_enabled: bool = True
    """NCCL enables LL128 by default only where the intra-node path is NVLink (tuning.cc:
    ``pEnable &= (graphs[a]->typeIntra <= PATH_NVB)``): False on PCIe-only nodes."""
    net_overhead_s: float = 1.0e-6
    """NCCL ``getNetOverhead`` (tuning.cc): 1 us on Intel (and other) hosts, 2 us on AMD hosts; every
    intra-node step of a ring across nodes costs at least this (Simple: 3x)."""
    gpu_generation: str | None = None
    """NCCL's GPU generation row (``volta``, ``ampere``, ``hopper``, ``blackwell``) for the per-channel
    caps of :data:`PER_CHANNEL_MAX_BUS_BANDWIDTH_GB_PER_S`; None: no per-channel cap (RCCL, unknown)."""
    source: str = "NVIDIA/nccl src/graph/tuning.cc"
    """Where the numbers come from."""

    def __post_init__(self) -> None:
        if len(self.ll_max_bus_bandwidth_bytes_per_s) != 3:
            raise InputError("ll_max_bus_bandwidth_bytes_per_s needs 3 values (1 node, 2 nodes, more), "
                             f"got {self.ll_max_bus_bandwidth_bytes_per_s!r}")
        for v in self.ll_max_bus_bandwidth_bytes_per_s:
            require_finite_positive("ll_max_bus_bandwidth_bytes_per_s", v)
        if self.gpu_generation is not None and self.gpu_generation not in PER_CHANNEL_MAX_BUS_BANDWIDTH_GB_PER_S:
            valid = ", ".join(PER_CHANNEL_MAX_BUS_BANDWIDTH_GB_PER_S)
            raise InputError(f"unknown gpu_generation {self.gpu_generation!r} (valid: {valid})")
        require_finite_positive("net_overhead_s", self.net_overhead_s, allow_zero=True)
        if self.nvls_channels_multi_node is not None:
            v = self.nvls_channels_multi_node
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"nvls_channels_multi_node must be an integer >= 1, got {v!r}")
        for name in ("nvls_channels", "nvls_chunk_bytes"):
            require_count(name, getattr(self, name))

    def per_channel_cap_bytes_per_s(self, kind: str, nodes: int, channels: int) -> float | None:
        """``channels x perChMax<kind>`` for a group on ``nodes`` nodes (bus bandwidth, bytes/s).

        None in one node (the ring's cap there is :meth:`one_node_ring_ll128_cap_bytes_per_s`, the tree is
        not capped in one node) and without a generation. Across nodes NCCL's graph search finds one channel per NIC
        (NCCL INFO "Pattern 5, ..., nChannels 7" on an H100 node with 7 NICs in use,
        NVIDIA/nccl#1519; "nChannels 4" on 4 NICs, NVIDIA/nccl#601), and ncclTopoTuneModel
        multiplies the caps by that searched count: ``channels`` is the NICs per node.
        """
        if self.gpu_generation is None or nodes < 2:
            return None
        row = PER_CHANNEL_MAX_BUS_BANDWIDTH_GB_PER_S[self.gpu_generation][kind]
        return channels * row[min(nodes, 3) - 1] * 1e9

    def one_node_ring_ll128_cap_bytes_per_s(self, channels: int) -> float | None:
        """``channels x perChMaxRingLL128Bw`` of a group in one node (the N1 column): NCCL caps ring LL128 with
        the searched ring's channel count there too (tuning.cc: ``index2 = nNodes - 1``), ``channels`` from
        :func:`one_node_ring_graph`. Blackwell: 16 x 40 = 640 GB/s, below LL128's 0.92 x 720 = 662 (NCCL 2.29.7+;
        2.29.2's 34.5 gives 552, 2.25-2.28's 73.4 gives 1174, which does not bind); Hopper 12 x 36.7 = 440 and
        Ampere 12 x 20 = 240 stay above 0.92 of theirs. None without a generation."""
        if self.gpu_generation is None:
            return None
        return channels * PER_CHANNEL_MAX_BUS_BANDWIDTH_GB_PER_S[self.gpu_generation]["ring_ll128"][0] * 1e9

    def nvls_channel_count(self, nodes: int) -> int:
        """NVLS channels for a group spanning ``nodes`` nodes."""
        if nodes > 1 and self.nvls_channels_multi_node is not None:
            return self.nvls_channels_multi_node
        return self.nvls_channels

    def ll_max_bus_bandwidth(self, nodes: int) -> float:
        """``llMaxBw`` for a group spanning ``nodes`` nodes."""
        return self.ll_max_bus_bandwidth_bytes_per_s[min(nodes, 3) - 1]
