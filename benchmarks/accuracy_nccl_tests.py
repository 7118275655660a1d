#!/usr/bin/env python3
"""Accuracy of preset-only predictions against real published nccl-tests / rccl-tests tables.

Every table under tests/data/nccl_tests/ whose system matches a commcost preset
(preset_matches.json; the loader is benchmarks/real_tables.py) is predicted row by row with
``collective_cost(op, S, P, system_group(preset, nodes=n, gpus=P))`` -- the table's own collective
(all-reduce, all-gather, reduce-scatter, all-to-all), presets only, no calibration, algorithm
``auto`` -- for every row of 1 MiB or more. Error is signed: ``(t_pred - t_meas) / t_meas``, so a
negative error is a prediction too fast.

Two views:

* **leave-one-system-out** (the headline): the constants derived from tables
  (:data:`commcost.comm.algorithms.P2P_EFFICIENCY`, the fan-in slowdown
  :data:`commcost.comm.algorithms.FAN_IN_SLOWDOWN_PER_DOUBLING`) are re-derived from the tuning tables
  of every *other* system before a system's rows are scored (:func:`derive_issue20_constants`; a
  constant with no other source falls back to its neutral value: ``e_p = 1``, ``c = 0``), and the
  preset fabric numbers read off a system's own tables fall back to their earlier values
  (:data:`FABRIC_VALUES_FROM_TABLES`), and the system preset numbers fitted on one system's tables (the GB200
  NVL72 spine share, the Azure congestion rule: :data:`SYSTEM_VALUES_FROM_TABLES`) are neutral while that system
  is scored, so no system is scored with a number taken from its own rows.
  Constants of earlier issues (benchmarks/derive_constants.py) stay as shipped.
* **tuning / held-out** (tests/data/nccl_tests/split.json): the shipped constants, the systems
  split into those constants may have been chosen on and a held-out third.

Printed per collective and scope (one node / across nodes): rows, median |error| over all rows
>= 1 MiB, over 1-64 MiB and over > 64 MiB, the share of predictions too fast (no systematic
sign: 35-65%), and the uncertainty band's coverage (:func:`commcost.comm.band.collective_band`).
PyTorch inductor's estimator (benchmarks/vs_inductor.py) is compared on all-reduce rows where
torch is installed.

    python benchmarks/accuracy_nccl_tests.py            # every row, then the summaries
    python benchmarks/accuracy_nccl_tests.py --summary  # the summaries only
"""

from __future__ import annotations

import statistics
import sys
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

from commcost import collective_cost  # noqa: E402
from commcost.comm import algorithms, protocol_terms, table_terms  # noqa: E402
from commcost.comm.algorithms import protocol_costs  # noqa: E402
from commcost.comm.band import band_class, collective_band  # noqa: E402
from commcost.hardware.registry import systems  # noqa: E402
from real_tables import load_tables  # noqa: E402

MIN_BYTES = 2 ** 20
MID_MAX_BYTES = 64 * 2 ** 20
OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")

DERIVATION_EXCLUDED: dict[str, str] = {}
"""Tuning tables left out of :func:`derive_issue20_constants`, with the reason."""


FABRIC_VALUES_FROM_TABLES = {
    "OCI MI355X Pollara": {"infinity_fabric_mi355": {"achievable_bandwidth_bytes_per_s": 0.703 * 537.6e9}},
    "GCP A3 Mega (TCPXO)": {"tcpxo": {"achievable_bandwidth_bytes_per_s": 20.0e9, "step_latency_s": 35.0e-6,
                                      "collective_floor_s": 0.0}},
    "GCP A3 High (TCPX)": {"tcpx": {"achievable_bandwidth_bytes_per_s": 10.0e9, "step_latency_s": 50.0e-6,
                                    "collective_floor_s": 0.0}},
}
"""Preset fabric numbers set from one system's tables, and the value each falls back to while that
system is left out: MI355X's Infinity Fabric at MI300X's measured share of line (315/448 = 0.703 of 537.6
GB/s), tcpxo and tcpx at the 80%-of-line and 35 us / 50 us step assumptions they had before their tables were
found, and no network floor (tcpxo's floor is read off its table's unscored 8-512 B rows, tcpx's off its 8 MiB
row: both are the system's own rows, so neither is used while it is left out; tcpx's floor then also leaves the
other system's scoring untouched, as each system's rows see only their own fabric)."""


SYSTEM_VALUES_FROM_TABLES = {
    "CoreWeave GB200 NVL72": {"gb200-nvl72": {"spine_oversubscription": 1.0}},
    "Azure ND H100 v5": {"azure-nd-h100-v5": {"slowdown_per_node_doubling": 0.0}},
}
"""System preset numbers fitted on one system's own tables (benchmarks/derive_constants.py), and the neutral
value each takes while that system is scored: the spine share of ``gb200-nvl72`` (``spine_oversubscription``
2.5, scanned on CoreWeave's 20-rack rows) falls back to a non-blocking spine (1); the congestion rule of
``azure-nd-h100-v5`` (``slowdown_per_node_doubling`` 0.21, fitted on the Azure 2-64 node sweep) to none (0).
Other systems that took these numbers by transfer (oci-gb200-nvl72's spine share, the GB200 presets' and
azure-nd-h200-v5's congestion rule) keep them: for them they come from another system's tables."""


def _pct(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 100:5.1f}%" if xs else "    -"


def _p90(xs: list[float]) -> str:
    """The 90th percentile of ``xs`` (nearest rank: the ``ceil(0.9 n)``-th smallest), as a percentage."""
    if not xs:
        return "    -"
    ordered = sorted(xs)
    return f"{ordered[max(0, -(-9 * len(ordered) // 10) - 1)] * 100:5.1f}%"


def _signed(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 100:+5.1f}%" if xs else "    -"


def _share(flags: list[bool]) -> str:
    return f"{100 * sum(flags) / len(flags):4.0f}%" if flags else "   -"


def _inductor(preset: str):
    try:
        import torch  # noqa: F401
        from vs_inductor import GENERATION, inductor_estimator
    except ImportError:
        return None
    return inductor_estimator(preset) if systems()[preset]["gpu"] in GENERATION else None


def derive_issue20_constants(tables) -> dict[str, float]:
    """``{"P2P_EFFICIENCY": e_p, "FAN_IN_SLOWDOWN_PER_DOUBLING": c}`` from the largest rows of ``tables``.

    ``e_p`` = median over one-node all-to-all tables of the measured bus bandwidth
    ``(P-1)/P S / t`` over the preset's intra-node achievable bandwidth ``B_i``; ``c`` = median over
    multi-node all-to-all tables on more than two nodes of a fabric that cuts rates on incast (RoCE,
    :attr:`commcost.comm.topology.Topology.incast_rate_cut`) of
    :func:`commcost.comm.algorithms.fan_in_slowdown_from` at the measured NIC rate
    ``(P-g)/P S / t`` over the preset's ``B_e`` (the sum of a GPU's ports). Neutral values (1, 0) when no table gives one.
    """
    e_ps, cs = [], []
    for t in tables:
        if t.op != "all_to_all" or t.name in DERIVATION_EXCLUDED or not t.rows:
            continue
        row = max(t.rows, key=lambda r: r.size_bytes)
        topo, P = t.group(row)
        g = min(P, topo.gpus_per_node)
        if row.nodes == 1:
            e_ps.append((P - 1) / P * row.size_bytes / row.time_s / topo.intra.bandwidth_bytes_per_s)
        elif row.nodes > 2 and topo.incast_rate_cut:  # the fan-in loss is a RoCE fabric's (Topology.incast_rate_cut)
            ports_bw = topo.inter.bandwidth_bytes_per_s  # an all-to-all drives every port of its GPU
            share = (P - g) / P * row.size_bytes / row.time_s / ports_bw
            cs.append(algorithms.fan_in_slowdown_from(row.nodes, min(share, 1.0)))
    return {"P2P_EFFICIENCY": min(1.0, statistics.median(e_ps)) if e_ps else 1.0,
            "FAN_IN_SLOWDOWN_PER_DOUBLING": max(0.0, statistics.median(cs)) if cs else 0.0}


@contextmanager
def _constants(values: dict[str, float] | None, fabric_values: dict[str, dict[str, float]] | None = None,
               system_values: dict[str, dict[str, float]] | None = None):
    """The model with ``values`` in place of the shipped issue-20 constants, ``fabric_values`` in place of
    those preset fabric fields and ``system_values`` of those system preset fields (None: as shipped). The
    packaged tables are not changed: the overrides live in copies, for the context only."""
    import commcost.hardware.registry as presets

    # each constant is read where it is defined (table or protocol terms) and re-exported by algorithms: set it on all
    modules = [m for m in (algorithms, table_terms, protocol_terms)]
    saved = {(m, k): getattr(m, k) for k in (values or {}) for m in modules if hasattr(m, k)}
    shipped_fabrics, shipped_systems = presets.fabrics, presets.systems

    def _over(shipped, overrides):
        def table():
            t = shipped()
            return {**t, **{name: {**t[name], **fields} for name, fields in overrides.items()}} if overrides else t
        return table

    try:
        for k, v in (values or {}).items():
            for m in modules:
                if hasattr(m, k):
                    setattr(m, k, v)
        presets.fabrics = _over(shipped_fabrics, fabric_values)
        presets.systems = _over(shipped_systems, system_values)
        yield
    finally:
        presets.fabrics, presets.systems = shipped_fabrics, shipped_systems
        for (m, k), v in saved.items():
            setattr(m, k, v)


def _score_table(table, est) -> list[dict]:
    out = []
    for row in table.rows:
        if row.size_bytes < MIN_BYTES:
            continue
        topo, P = table.group(row)
        c = collective_cost(table.op, row.size_bytes, P, topo)
        low, high = collective_band(c, topo)
        proto = next(iter(protocol_costs(table.op, row.size_bytes, P, topo, c.algorithm)))
        cls = band_class(c, topo)
        ind = (est(row.size_bytes, P) - row.time_s) / row.time_s if est and table.op == "all_reduce" else None
        out.append({"table": table.name, "system": table.system, "split": table.split, "preset": table.preset,
                    "op": table.op, "scope": "one_node" if row.nodes == 1 else "multi_node",
                    "S": row.size_bytes, "nodes": row.nodes, "P": P, "measured_s": row.time_s,
                    "predicted_s": c.total_s, "err": (c.total_s - row.time_s) / row.time_s,
                    "how": f"{c.algorithm.value}/{proto.value}", "in_band": low <= row.time_s <= high,
                    "low_s": low, "high_s": high, "inductor_err": ind, "band_class": cls})
    return out


def score(with_inductor: bool = True) -> list[dict]:
    """One dict per scored row with the shipped constants: table, split, op, scope, size, measured,
    predicted, signed error, band, inductor error."""
    out = []
    for table in load_tables():
        out += _score_table(table, _inductor(table.preset) if with_inductor else None)
    return out


def score_leave_one_system_out() -> list[dict]:
    """As :func:`score`, each system's rows priced with the issue-20 constants derived without it."""
    tables = load_tables()
    out = []
    for system in dict.fromkeys(t.system for t in tables):
        others = [t for t in tables if t.split == "tuning" and t.system != system]
        with _constants(derive_issue20_constants(others), FABRIC_VALUES_FROM_TABLES.get(system),
                        SYSTEM_VALUES_FROM_TABLES.get(system)):
            for table in (t for t in tables if t.system == system):
                out += _score_table(table, None)
    return out


def band_leave_one_system_out(rows: list[dict], cls: str = "multi_node") -> dict:
    """The all-reduce ``cls`` band re-derived leaving each system out, and the coverage it gets.

    For each system, ``(r_lo, r_hi)`` = the 5th and 95th percentiles of ``t_meas / t_pred`` over the TUNING
    all-reduce rows of class ``cls`` of every *other* system (benchmarks/derive_constants.py's rule), scored on
    that system's rows (tuning and held out). Returns the pooled coverage of those bands, the coverage of the
    shipped band on the same rows, and the band re-derived from every tuning row with its held-out coverage."""
    from commcost.comm.band import class_ratios
    from derive_constants import _quantile

    mine = [r for r in rows if r["op"] == "all_reduce" and r["band_class"] == cls]
    ratio = {id(r): r["measured_s"] / r["predicted_s"] for r in mine}
    tuning = [r for r in mine if r["split"] == "tuning"]
    hits = []
    for system in dict.fromkeys(r["system"] for r in mine):
        other = [ratio[id(r)] for r in tuning if r["system"] != system]
        lo, hi = _quantile(other, 0.05), _quantile(other, 0.95)
        hits += [lo <= ratio[id(r)] <= hi for r in mine if r["system"] == system]
    shipped = class_ratios("all_reduce", cls)
    every = [ratio[id(r)] for r in tuning]
    rederived = (_quantile(every, 0.05), _quantile(every, 0.95))
    held = [ratio[id(r)] for r in mine if r["split"] == "heldout"]
    return {"rows": len(mine), "loso_coverage": sum(hits) / len(hits),
            "shipped": shipped, "shipped_coverage": sum(shipped[0] <= x <= shipped[1] for x in ratio.values()) / len(mine),
            "rederived": rederived,
            "heldout_coverage_shipped": sum(shipped[0] <= x <= shipped[1] for x in held) / len(held),
            "heldout_coverage_rederived": sum(rederived[0] <= x <= rederived[1] for x in held) / len(held)}


def _summary_line(label: str, rows: list[dict]) -> str:
    a = [abs(r["err"]) for r in rows]
    mid = [abs(r["err"]) for r in rows if r["S"] <= MID_MAX_BYTES]
    big = [abs(r["err"]) for r in rows if r["S"] > MID_MAX_BYTES]
    fast = [r["err"] < 0 for r in rows]
    band = [r["in_band"] for r in rows]
    ind = [r for r in rows if r["inductor_err"] is not None]
    ind_s = (f"{_pct([abs(r['inductor_err']) for r in ind]):>9} {_pct([abs(r['err']) for r in ind]):>7}"
             if ind else f"{'-':>9} {'-':>7}")
    return (f"{label:<46} {len(rows):>4} {_pct(a):>7} {_p90(a):>6} {_signed([r['err'] for r in rows]):>7} "
            f"{_pct(mid):>8} {_pct(big):>7} {_share(fast):>6} {_share(band):>6} {ind_s}")


HEAD = (f"{'median |error|, rows >= 1 MiB':<46} {'rows':>4} {'all':>7} {'p90':>6} {'signed':>7} {'1-64MiB':>8} {'>64MiB':>7} "
        f"{'fast':>6} {'band':>6} {'inductor':>9} {'(cc)':>7}")


def _by_collective(rows: list[dict]) -> None:
    print(HEAD)
    for op in OPS:
        for scope in ("one_node", "multi_node"):
            sub = [r for r in rows if r["op"] == op and r["scope"] == scope]
            if sub:
                print(_summary_line(f"{op} {scope}", sub))
    for scope in ("one_node", "multi_node"):
        print(_summary_line(f"every collective {scope}", [r for r in rows if r["scope"] == scope]))
    print(_summary_line("POOLED", rows))


def main(argv: list[str]) -> int:
    rows = score()
    if "--summary" not in argv:
        for name in dict.fromkeys(r["table"] for r in rows):
            sub = [r for r in rows if r["table"] == name]
            print(f"{name} ({sub[0]['split']}, {sub[0]['op']})  ->  preset {sub[0]['preset']}")
            print(f"  {'size (B)':>12} {'nodes':>5} {'measured':>11} {'commcost':>11} {'band':>21} "
                  f"{'algorithm/protocol':>22} {'error':>7} {'inductor':>8}")
            for r in sub:
                ind = f"{r['inductor_err'] * 100:+7.0f}%" if r["inductor_err"] is not None else "       -"
                print(f"  {r['S']:>12} {r['nodes']:>5} {r['measured_s'] * 1e6:>9.1f}us {r['predicted_s'] * 1e6:>9.1f}us "
                      f"{r['low_s'] * 1e6:>9.1f}-{r['high_s'] * 1e6:<9.1f}us {r['how']:>22} {r['err'] * 100:+6.1f}% {ind}")
            print()
    print("LEAVE-ONE-SYSTEM-OUT (headline): each system scored with the issue-20 constants derived without it")
    _by_collective(score_leave_one_system_out())
    print("\nshipped constants, every table:")
    _by_collective(rows)
    for side in ("tuning", "heldout"):
        print(f"\n{side}:")
        print(HEAD)
        side_rows = [r for r in rows if r["split"] == side]
        for name in dict.fromkeys(r["table"] for r in side_rows):
            print(_summary_line(name, [r for r in side_rows if r["table"] == name]))
        print(_summary_line(f"POOLED {side}", side_rows))
        print(_summary_line(f"POOLED {side} all_reduce", [r for r in side_rows if r["op"] == "all_reduce"]))
    b = band_leave_one_system_out(rows)
    print(f"\nmulti_node all-reduce band, {b['rows']} rows: shipped {b['shipped'][0]:.3f}-{b['shipped'][1]:.3f} covers "
          f"{b['shipped_coverage']:.0%}; re-derived leaving each system out covers {b['loso_coverage']:.0%}; "
          f"re-derived from every tuning row {b['rederived'][0]:.3f}-{b['rederived'][1]:.3f}: held-out coverage "
          f"{b['heldout_coverage_rederived']:.0%} (shipped {b['heldout_coverage_shipped']:.0%})")
    print("\ncolumns: all / 1-64 MiB / > 64 MiB = median |relative error|; p90 = its 90th percentile (all rows); "
          "signed = median signed error (negative: too fast); fast = share of predictions faster "
          "than measured (no systematic sign: 35-65%); band = share of measured times inside "
          "commcost.comm.band.collective_band; inductor = torch._inductor.comm_analysis on the all-reduce rows it "
          "can price (NVIDIA GPUs), (cc) = commcost on those same rows")
    if all(r["inductor_err"] is None for r in rows):
        print("(torch not installed: the inductor comparison is skipped)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
