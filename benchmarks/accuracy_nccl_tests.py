#!/usr/bin/env python3
"""Accuracy of preset-only predictions against real published nccl-tests all-reduce tables.

For each table in tests/data/nccl_tests/ whose system matches a commcost preset, every
row of 1 MiB or more is predicted with ``collective_cost("all_reduce", S, P,
system_topology(preset, nodes), "auto")`` -- no calibration -- and compared with the
measured out-of-place time. Prints the error per row (with the algorithm and NCCL
protocol the model picked), the median absolute relative error per table, over all
rows (target <= 35%) and over the 1-64 MiB rows, each next to the same figure for
the model *before* NCCL's protocol model (the preset topology with ``protocols=None``:
one alpha-beta pair per tier, ``auto`` over every algorithm), and, when torch is
installed, PyTorch's estimator on the same hardware numbers (benchmarks/vs_inductor.py).
Tables from systems with no matching preset (tests/data/nccl_tests/preset_matches.json, "unmatched") are listed and skipped.

Nothing here is fitted: every constant of the protocol model comes from NCCL's source
(commcost.comm.protocols). One structural choice, the NVLS pipeline fill, was made after
looking at the single-node H100 table, so the summary also prints the medians
without that table.

    python benchmarks/accuracy_nccl_tests.py
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

from commcost import collective_cost, system_topology  # noqa: E402
from commcost.comm.algorithms import protocol_costs  # noqa: E402
from commcost.calibrate.nccl_tests import read_nccl_tests  # noqa: E402

DATA = HERE.parent / "tests" / "data" / "nccl_tests"
MIN_BYTES = 2 ** 20
MID_MAX_BYTES = 64 * 2 ** 20
SHAPED_ON = "h100_nvlink_1node_8gpu_all_reduce.log"  # the table the NVLS fill form was chosen on

# table -> (preset, nodes, ranks): the preset whose hardware the table's system matches
_MATCHES_FILE = json.loads((DATA / "preset_matches.json").read_text(encoding="utf-8"))
MATCHES = {name: tuple(v) for name, v in _MATCHES_FILE["matched"].items()}
UNMATCHED = _MATCHES_FILE["unmatched"]


def _median_pct(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 100:5.1f}%" if xs else "    -"


def main() -> int:
    try:
        from vs_inductor import inductor_estimator
        import torch  # noqa: F401
    except ImportError:
        inductor_estimator = None
    # per table: (all rows, 1-64 MiB rows) for the model now and before the protocol model
    now: dict[str, tuple[list[float], list[float]]] = {}
    before: dict[str, tuple[list[float], list[float]]] = {}
    ind_errors: list[float] = []
    print("all-reduce, preset-only predictions (algorithm auto) vs measured nccl-tests, sizes >= 1 MiB\n")
    for path in sorted(DATA.iterdir()):
        if path.name in UNMATCHED:
            print(f"{path.name}: skipped ({UNMATCHED[path.name]})\n")
            continue
        if path.name not in MATCHES:
            continue
        preset, nodes, P = MATCHES[path.name]
        topo = system_topology(preset, nodes=nodes)
        old_topo = dataclasses.replace(topo, protocols=None)
        est = inductor_estimator(preset) if inductor_estimator else None
        run = read_nccl_tests(path)[0]
        print(f"{path.name}  ->  preset {preset}, {nodes} node(s), {P} GPUs")
        print(f"  {'size (B)':>12} {'measured':>11} {'commcost':>11} {'algorithm/protocol':>24} {'error':>8}"
              f" {'before':>8}" + (f" {'inductor':>11} {'error':>8}" if est else ""))
        now[path.name], before[path.name] = ([], []), ([], [])
        for row in run.rows:
            if row.size_bytes < MIN_BYTES:
                continue
            t_meas = row.out_of_place.time_s
            c = collective_cost("all_reduce", row.size_bytes, P, topo)
            proto = next(iter(protocol_costs("all_reduce", row.size_bytes, P, topo, c.algorithm)))
            err = (c.total_s - t_meas) / t_meas
            old_err = (collective_cost("all_reduce", row.size_bytes, P, old_topo).total_s - t_meas) / t_meas
            for store, e in ((now, err), (before, old_err)):
                store[path.name][0].append(abs(e))
                if row.size_bytes <= MID_MAX_BYTES:
                    store[path.name][1].append(abs(e))
            line = (f"  {row.size_bytes:>12} {t_meas * 1e6:>9.1f}us {c.total_s * 1e6:>9.1f}us "
                    f"{c.algorithm.value + '/' + proto.value:>24} {err * 100:>+7.1f}% {old_err * 100:>+7.1f}%")
            if est:
                t_ind = est(row.size_bytes, P)
                ind_err = (t_ind - t_meas) / t_meas
                ind_errors.append(abs(ind_err))
                line += f" {t_ind * 1e6:>9.1f}us {ind_err * 100:>+7.1f}%"
            print(line)
        print(f"  median |error| {_median_pct(now[path.name][0])} over {len(now[path.name][0])} rows "
              f"(before {_median_pct(before[path.name][0])}); 1-64 MiB: {_median_pct(now[path.name][1])} "
              f"(before {_median_pct(before[path.name][1])})\n")

    print(f"{'median |error| per table':<48} {'all rows':>16} {'1-64 MiB rows':>18}")
    print(f"{'':<48} {'now':>7} {'before':>8} {'now':>8} {'before':>9}")
    for name in now:
        print(f"{name:<48} {_median_pct(now[name][0]):>7} {_median_pct(before[name][0]):>8} "
              f"{_median_pct(now[name][1]):>8} {_median_pct(before[name][1]):>9}")

    def pooled(store, which, skip=()):
        return [e for name, v in store.items() if name not in skip for e in v[which]]
    for label, skip in (("all tables", ()), (f"without {SHAPED_ON}", (SHAPED_ON,))):
        a, m = pooled(now, 0, skip), pooled(now, 1, skip)
        print(f"{label:<48} {_median_pct(a):>7} {_median_pct(pooled(before, 0, skip)):>8} "
              f"{_median_pct(m):>8} {_median_pct(pooled(before, 1, skip)):>9}   ({len(a)} rows, {len(m)} of 1-64 MiB)")
    print(f"\ncommcost: median absolute relative error {_median_pct(pooled(now, 0)).strip()} over "
          f"{len(pooled(now, 0))} rows of {len(MATCHES)} tables (target <= 35%, later 20%); "
          f"before the protocol model {_median_pct(pooled(before, 0)).strip()}")
    if ind_errors:
        print(f"torch inductor estimator, same hardware numbers: median absolute relative error "
              f"{statistics.median(ind_errors) * 100:.1f}%")
    else:
        print("(torch not installed: the inductor comparison is skipped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
