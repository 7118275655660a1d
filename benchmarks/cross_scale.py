#!/usr/bin/env python3
"""Cross-scale calibration: fit at <= 2 nodes, predict >= 4 nodes of the same system.

For each system with real tables at several node counts (tests/data/nccl_tests/, via
benchmarks/real_tables.py), the tiers of its preset are fitted to the rows >= 1 MiB measured on 1
and 2 nodes (:func:`commcost.calibrate.tiers.fit_tiers`) and every row on 4 or more nodes is
predicted through the topology. Printed beside it: the preset alone, and a flat alpha-beta profile
fitted on the 2-node rows (:func:`commcost.calibrate.fit.fit_alpha_beta`, one regime per size range)
reused at the larger group size, which is what was measured missing by 40%.

    python benchmarks/cross_scale.py
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

from commcost import collective_cost  # noqa: E402
from commcost.calibrate.fit import Sample, fit_alpha_beta  # noqa: E402
from commcost.calibrate.tiers import TierSample, fit_tiers  # noqa: E402
from commcost.comm.collectives import Collective, bus_bandwidth_factor, ring_latency_steps  # noqa: E402
from commcost.comm.systems import system_group  # noqa: E402
from real_tables import load_tables  # noqa: E402

SYSTEMS = {  # system -> the tables holding its node counts
    "mi325x-roce": ("allreduce_mi325x_amd_aac11_1x8.txt", "allreduce_mi325x_amd_aac11_2x8.txt",
                    "allreduce_mi325x_amd_aac11_4x8.txt", "allreduce_mi325x_amd_aac11_8x8.txt"),
    "azure-nd-h100-v5": ("busbw_h100_azure_ndv5_1x8.md", "busbw_h100_azure_ndv5_scaling_8GiB.md"),
}


def main() -> int:
    tables = {t.name: t for t in load_tables()}
    pooled = {"tiers": [], "preset": [], "flat": []}
    for system, names in SYSTEMS.items():
        rows = [r for n in names for r in tables[n].rows if r.size_bytes >= 2 ** 20]
        small = [r for r in rows if r.nodes <= 2]
        big = [r for r in rows if r.nodes >= 4]
        fit = fit_tiers(system, [TierSample(nodes=r.nodes, gpus=r.gpus, message_bytes=r.size_bytes, time_s=r.time_s)
                                 for r in small])
        two = [r for r in small if r.nodes == 2]
        flat = fit_alpha_beta([Sample(size_bytes=r.size_bytes, time_s=r.time_s) for r in two],
                              op=Collective.ALL_REDUCE, gpus=two[0].gpus) if len({r.size_bytes for r in two}) >= 2 else None
        print(f"{system}: fitted on {len(small)} rows at nodes {fit.fitted_nodes}: s_i = {fit.intra_bandwidth_scale:.3f}, "
              f"s_e = {fit.inter_bandwidth_scale:.3f}, m_e = {fit.inter_latency_scale:.3f} "
              f"(fit median |error| {fit.median_abs_error * 100:.1f}%); not identified, left at 1: "
              f"{', '.join(fit.not_fitted) or 'none'}")
        print(f"  {'nodes':>5} {'size':>12} {'measured':>11} {'tiers':>8} {'preset':>8} {'flat 2-node':>12}  extrapolates")
        for r in big:
            meas = r.time_s
            t_tiers = collective_cost("all_reduce", r.size_bytes, r.gpus, fit.topology(r.nodes)).total_s
            topo, P = system_group(system, nodes=r.nodes, gpus=r.gpus)
            t_preset = collective_cost("all_reduce", r.size_bytes, P, topo).total_s
            errs = {"tiers": t_tiers / meas - 1, "preset": t_preset / meas - 1}
            if flat is not None:
                reg = flat.regime_for(r.size_bytes)  # the 2-node line reused with the larger group's P
                t_flat = (ring_latency_steps(Collective.ALL_REDUCE, r.gpus) * reg.alpha_s
                          + bus_bandwidth_factor(Collective.ALL_REDUCE, r.gpus) * r.size_bytes / reg.bandwidth_bytes_per_s)
                errs["flat"] = t_flat / meas - 1
            for k, e in errs.items():
                pooled[k].append(abs(e))
            flat_s = f"{errs['flat'] * 100:+11.1f}%" if "flat" in errs else f"{'-':>12}"
            print(f"  {r.nodes:>5} {r.size_bytes:>12} {meas * 1e3:>9.2f}ms {errs['tiers'] * 100:+7.1f}% "
                  f"{errs['preset'] * 100:+7.1f}% {flat_s}  {', '.join(fit.extrapolated(r.nodes))}")
        print()
    for k, v in pooled.items():
        if v:
            print(f"median |error| at >= 4 nodes, {k:<7}: {statistics.median(v) * 100:5.1f}% over {len(v)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
