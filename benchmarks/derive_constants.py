#!/usr/bin/env python3
"""Derive the constants commcost takes from the TUNING tables (never the held-out ones).

0. ``TIER_OVERLAP_LOSS`` (commcost.comm.algorithms): on the grid 0, 0.05, ..., 0.5, the value with the
   lowest median |error| (tuning rows >= 1 MiB) among those with at most 65% of predictions too fast.

1. The congestion rule of ``azure-nd-h100-v5`` (systems.json ``slowdown_per_node_doubling``):
   with the rule switched off, the ratio ``y = t_meas / t_pred`` of the 8 GiB sweep over node count
   (busbw_h100_azure_ndv5_scaling_8GiB.md, mean of the static and adaptive routing columns) is fitted
   by ``y = 1 + k log2(n / n_0)`` for ``n > n_0 = 8`` (least squares through the origin:
   ``k = sum(x (y - 1)) / sum(x^2)``, ``x = log2(n / 8)``).
2. The spine share of ``gb200-nvl72`` (systems.json ``spine_oversubscription``): on the grid 2.0, 2.1, ...,
   3.0, the value with the lowest median |error| of the ring on the one multi-pod table (20 racks).
3. The uncertainty band (src/commcost/hardware/bands.json): for each class of group (one node,
   several nodes, several NVL72-class racks), the 5th and 95th percentiles of ``t_meas / t_pred``
   over the tuning rows >= 1 MiB (commcost.comm.band).

Prints both; the numbers are copied into the preset files by hand (they are data with a source).

    python benchmarks/derive_constants.py                # print
    python benchmarks/derive_constants.py --write-bands  # and refresh src/commcost/hardware/bands.json (per-collective
                                                         # bands; add --write-class-bands for the three classes)
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

from commcost import collective_cost  # noqa: E402
from commcost.comm.band import MIN_BAND_ROWS, band_class  # noqa: E402
from commcost.comm.systems import system_group  # noqa: E402
from real_tables import load_tables  # noqa: E402


def _quantile(xs: list[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default 'linear' method)."""
    xs = sorted(xs)
    pos = q * (len(xs) - 1)
    i = int(math.floor(pos))
    return xs[i] if i + 1 >= len(xs) else xs[i] + (pos - i) * (xs[i + 1] - xs[i])


def _scan_overlap_loss(tables) -> None:
    import commcost.comm.protocol_terms as alg

    saved, results = alg.TIER_OVERLAP_LOSS, []
    try:
        for k in range(11):
            alg.TIER_OVERLAP_LOSS = phi = k * 0.05
            errs = []
            for t in tables:
                for row in t.rows:
                    if row.size_bytes >= 2 ** 20:
                        topo, P = t.group(row)
                        errs.append(collective_cost("all_reduce", row.size_bytes, P, topo).total_s / row.time_s - 1)
            med, fast = statistics.median(abs(e) for e in errs), sum(e < 0 for e in errs) / len(errs)
            results.append((phi, med, fast))
            print(f"  phi {phi:.2f}: median |error| {med * 100:5.2f}%, {fast * 100:4.1f}% too fast")
    finally:
        alg.TIER_OVERLAP_LOSS = saved
    ok = [r for r in results if r[2] <= 0.65]
    best = min(ok, key=lambda r: r[1]) if ok else None
    print(f"TIER_OVERLAP_LOSS = {best[0]:.2f} (lowest median with <= 65% too fast)\n" if best else "no phi meets 65%\n")


def _scan_spine_share(tables) -> None:
    """``spine_oversubscription`` of gb200-nvl72: the grid value that best fits the ring on the one multi-pod
    table (the run set NCCL_NVLS_ENABLE=0, and its ~5 ms floor at every size is the ring's 2(P-1) steps:
    the ring is what ran, so the spine is fitted through the ring, not through commcost's auto choice)."""
    multi_pod = [t for t in tables if t.preset == "gb200-nvl72" and any(r.nodes > 8 for r in t.rows)]
    results = []
    for k in range(20, 31):
        o_s = k / 10
        errs = []
        for t in multi_pod:
            for row in t.rows:
                topo, P = t.group(row)
                topo = dataclasses.replace(topo, spine_oversubscription=o_s)
                errs.append(collective_cost("all_reduce", row.size_bytes, P, topo, "ring").total_s / row.time_s - 1)
        results.append((o_s, statistics.median(abs(e) for e in errs), errs))
        print(f"  o_s {o_s:.1f}: ring median |error| {results[-1][1] * 100:5.2f}%  "
              + " ".join(f"{e * 100:+.0f}%" for e in errs))
    best = min(results, key=lambda r: r[1])
    print(f"spine_oversubscription = {best[0]:.1f} (gb200-nvl72; lowest ring median over "
          f"{', '.join(t.name for t in multi_pod)})\n")


def main() -> int:
    tables = [t for t in load_tables() if t.split == "tuning"]
    print("spine share of multi-pod NVL72, ring rows:")
    _scan_spine_share(tables)
    if "--skip-overlap" not in sys.argv:
        print("tier overlap loss, tuning rows >= 1 MiB:")
        _scan_overlap_loss(tables)
    sweep = next(t for t in tables if t.name == "busbw_h100_azure_ndv5_scaling_8GiB.md")
    by_n: dict[int, list[float]] = {}
    for row in sweep.rows:
        topo, P = system_group(sweep.preset, nodes=row.nodes, gpus=row.gpus)
        topo = dataclasses.replace(topo, full_bandwidth_nodes=None, slowdown_per_node_doubling=0.0)
        by_n.setdefault(row.nodes, []).append(row.time_s / collective_cost("all_reduce", row.size_bytes, P, topo).total_s)
    xs, ys = [], []
    for n, r in sorted(by_n.items()):
        print(f"  {n:>3} nodes: t_meas/t_pred = {statistics.mean(r):.3f} (rule off)")
        if n > 8:
            xs.append(math.log2(n / 8))
            ys.append(statistics.mean(r) - 1)
    k = sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs)
    print(f"congestion rule: slowdown_per_node_doubling k = {k:.3f} past 8 nodes\n")

    ratios: dict[str, list[float]] = {}
    for t in tables:
        for row in t.rows:
            if row.size_bytes < 2 ** 20:
                continue
            topo, P = t.group(row)
            c = collective_cost(t.op, row.size_bytes, P, topo)
            cls = band_class(c, topo)
            key = cls if t.op == "all_reduce" else f"{t.op}/{cls}"  # the class bands stay all-reduce's
            ratios.setdefault(key, []).append(row.time_s / c.total_s)
    ratios = {k: r for k, r in ratios.items() if "/" not in k or len(r) >= MIN_BAND_ROWS}
    print("band: t_meas / t_pred over the tuning rows >= 1 MiB")
    for cls, r in sorted(ratios.items()):
        print(f"  {cls:<22} rows {len(r):>3}  p05 {_quantile(r, 0.05):.3f}  median {statistics.median(r):.3f}  "
              f"p95 {_quantile(r, 0.95):.3f}")
    if "--write-bands" in sys.argv:  # refresh the numbers in bands.json, keeping each class's source text
        path = HERE.parent / "src" / "commcost" / "hardware" / "bands.json"
        table = json.loads(path.read_text(encoding="utf-8"))
        for cls, r in ratios.items():
            if "/" not in cls and "--write-class-bands" not in sys.argv:
                continue  # the class bands stay the unless asked (docs/fabrics.md 3)
            table.setdefault(cls, {"source": f"benchmarks/derive_constants.py: the tuning rows of {cls.replace('/', ' ')} "
                                             "(a band per collective and scope)"})
            lo, hi = _quantile(r, 0.05), _quantile(r, 0.95)
            if "/" in cls:  # few rows: never narrower than the class's all-reduce band on either side
                base = table[cls.split("/")[1]]
                lo, hi = min(lo, base["low_ratio"]), max(hi, base["high_ratio"])
            table[cls].update(low_ratio=round(lo, 3), high_ratio=round(hi, 3),
                              rows=len(r))
        lines = [f'  "_about": {json.dumps(table.pop("_about"))}']
        lines += [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in table.items()]
        path.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
