#!/usr/bin/env python3
"""Accuracy of preset-only predictions against real published nccl-tests all-reduce tables.

For each table in tests/data/nccl_tests/ whose system matches a commcost preset, every
row of 1 MiB or more is predicted with ``collective_cost("all_reduce", S, P,
system_topology(preset, nodes), "auto")`` -- no calibration -- and compared with the
measured out-of-place time. Prints the error per row, the median absolute relative
error per table and over all rows (target <= 35%), and, when torch is installed,
the same figure for PyTorch's estimator on the same hardware numbers
(benchmarks/vs_inductor.py). Tables from systems with no preset (GCP TCPXO, MI300X
RoCE) are listed and skipped.

    python benchmarks/accuracy_nccl_tests.py
"""

from __future__ import annotations

import json

import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

from commcost import collective_cost, system_topology  # noqa: E402
from commcost.calibrate.nccl_tests import read_nccl_tests  # noqa: E402

DATA = HERE.parent / "tests" / "data" / "nccl_tests"
MIN_BYTES = 2 ** 20

# table -> (preset, nodes, ranks): the preset whose hardware the table's system matches
_MATCHES_FILE = json.loads((DATA / "preset_matches.json").read_text(encoding="utf-8"))
MATCHES = {name: tuple(v) for name, v in _MATCHES_FILE["matched"].items()}
UNMATCHED = _MATCHES_FILE["unmatched"]


def main() -> int:
    try:
        from vs_inductor import inductor_estimator
        import torch  # noqa: F401
    except ImportError:
        inductor_estimator = None
    errors: list[float] = []
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
        est = inductor_estimator(preset) if inductor_estimator else None
        run = read_nccl_tests(path)[0]
        print(f"{path.name}  ->  preset {preset}, {nodes} node(s), {P} GPUs")
        print(f"  {'size (B)':>12} {'measured':>11} {'commcost':>11} {'algorithm':>17} {'error':>8}"
              + (f" {'inductor':>11} {'error':>8}" if est else ""))
        table_err = []
        for row in run.rows:
            if row.size_bytes < MIN_BYTES:
                continue
            t_meas = row.out_of_place.time_s
            c = collective_cost("all_reduce", row.size_bytes, P, topo)
            err = (c.total_s - t_meas) / t_meas
            table_err.append(abs(err))
            line = (f"  {row.size_bytes:>12} {t_meas * 1e6:>9.1f}us {c.total_s * 1e6:>9.1f}us "
                    f"{c.algorithm.value:>17} {err * 100:>+7.1f}%")
            if est:
                t_ind = est(row.size_bytes, P)
                ind_err = (t_ind - t_meas) / t_meas
                ind_errors.append(abs(ind_err))
                line += f" {t_ind * 1e6:>9.1f}us {ind_err * 100:>+7.1f}%"
            print(line)
        errors += table_err
        print(f"  median |error| {statistics.median(table_err) * 100:.1f}% over {len(table_err)} rows\n")
    print(f"commcost: median absolute relative error {statistics.median(errors) * 100:.1f}% "
          f"over {len(errors)} rows of {len(MATCHES)} tables (target <= 35%)")
    if ind_errors:
        print(f"torch inductor estimator, same hardware numbers: median absolute relative error "
              f"{statistics.median(ind_errors) * 100:.1f}%")
    else:
        print("(torch not installed: the inductor comparison is skipped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
