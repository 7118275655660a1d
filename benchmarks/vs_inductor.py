#!/usr/bin/env python3
"""commcost next to PyTorch's NCCL estimator, on the same hardware assumptions.

The peer: ``torch._inductor.comm_analysis.estimate_nccl_collective_runtime_impl(bytes,
group_size, coll)`` (ms), a port of NCCL's tuning model (src/graph/tuning.cc). It
detects the GPU generation and takes its intra/inter bandwidths from
``torch._inductor.config.intra_node_bw`` / ``inter_node_bw`` (GB/s); here we set
those to the preset's achievable figures and pin the GPU generation, so both
models see the same hardware. It assumes 8 GPUs per node when no GPU is present.

Prints, for a grid of sizes and group sizes on each system, both predictions
(commcost ``auto``) and the ratio inductor / commcost, then the median ratio.

    python benchmarks/vs_inductor.py            # needs torch (CPU build is enough)
"""

from __future__ import annotations

import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "src"))

from commcost import collective_cost, system_group  # noqa: E402
from commcost.comm.algorithms import protocol_costs  # noqa: E402
from commcost.hardware.registry import fabrics, systems  # noqa: E402

GENERATION = {"a100-sxm4-80gb": "AMPERE", "h100-sxm": "HOPPER", "h200-sxm": "HOPPER", "b200": "BLACKWELL",
              "gb200": "BLACKWELL"}
SYSTEMS = ("dgx-a100", "dgx-h100", "hgx-b200")
GROUPS = (8, 16, 32, 64, 128)
SIZES = tuple(2 ** k for k in range(20, 34, 2))  # 1 MiB .. 8 GiB


def inductor_estimator(system: str):
    """A function ``(size_bytes, gpus) -> seconds`` running torch's estimator with ``system``'s numbers."""
    import torch._inductor.comm_analysis as ca
    import torch._inductor.config as cfg

    sp = systems()[system]
    gen = ca.NVIDIA_GPU_TYPE[GENERATION[sp["gpu"]]]
    intra = fabrics()[sp["intra_fabric"]]["achievable_bandwidth_bytes_per_s"] / 1e9
    inter = fabrics()[sp["inter_fabric"]]["achievable_bandwidth_bytes_per_s"] / 1e9

    def estimate(size_bytes: float, gpus: int) -> float:
        saved = ca.get_gpu_type, cfg.intra_node_bw, cfg.inter_node_bw
        ca.get_gpu_type = lambda: gen  # the module looks the name up at call time
        cfg.intra_node_bw, cfg.inter_node_bw = intra, inter
        try:
            return ca.estimate_nccl_collective_runtime_impl(int(size_bytes), gpus, ca.NCCL_COLL.ALL_REDUCE) / 1e3
        finally:  # leave torch as we found it
            ca.get_gpu_type, cfg.intra_node_bw, cfg.inter_node_bw = saved

    return estimate


def main() -> int:
    try:
        import torch  # noqa: F401
    except ImportError:
        print("torch is not installed; install it with: pip install 'commcost[measure]'", file=sys.stderr)
        return 2
    print("all-reduce, commcost (auto) vs torch._inductor.comm_analysis.estimate_nccl_collective_runtime_impl")
    print("same hardware: preset achievable intra/inter bandwidth in inductor's config, GPU generation pinned\n")
    ratios_all = []
    for system in SYSTEMS:
        est = inductor_estimator(system)
        print(f"{system}:")
        print(f"  {'GPUs':>5} {'size':>10} {'commcost':>11} {'algorithm/protocol':>24} {'inductor':>11} "
              f"{'ratio ind/cc':>13}")
        ratios = []
        for P in GROUPS:
            topo, _ = system_group(system, gpus=P)
            for S in SIZES:
                c = collective_cost("all_reduce", S, P, topo)
                proto = next(iter(protocol_costs("all_reduce", S, P, topo, c.algorithm)))
                t_ind = est(S, P)
                ratio = t_ind / c.total_s
                ratios.append(ratio)
                print(f"  {P:>5} {S / 2**20:>7.0f}MiB {c.total_s * 1e3:>9.3f}ms {c.algorithm.value + '/' + proto.value:>24} "
                      f"{t_ind * 1e3:>9.3f}ms {ratio:>13.2f}")
        grid = [(p, s) for p in GROUPS for s in SIZES]
        multi = [r for r, (P, _) in zip(ratios, grid) if P > 8]
        one = [r for r, (P, _) in zip(ratios, grid) if P <= 8]
        print(f"  median ratio inductor/commcost on {system}: {statistics.median(ratios):.2f} "
              f"(multi-node only: {statistics.median(multi):.2f}; one node: {statistics.median(one):.2f}, "
              f"range {min(one):.2f}-{max(one):.2f})\n")
        ratios_all += ratios
    print(f"median ratio inductor/commcost over the grid: {statistics.median(ratios_all):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
