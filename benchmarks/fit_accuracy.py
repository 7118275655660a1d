"""Fit accuracy on real nccl-tests logs: fit on every other size, predict the sizes left out.

For each log under tests/data/nccl_tests/ this prints the median and worst absolute relative error of
the held-out predictions for sizes >= 1 MiB, for the regime model (the default of ``commcost fit``)
and for one straight line T = k*alpha + f*S/B, against a target of 10% for the median.

    python benchmarks/fit_accuracy.py [LOG ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from commcost.calibrate.data import load_series  # noqa: E402
from commcost.calibrate.fit import compare, fit_alpha_beta  # noqa: E402
from commcost.core.units import format_bytes, format_rate, format_seconds  # noqa: E402

TARGET = 0.10
MiB = 2**20


def main(paths: list[str]) -> int:
    logs = [Path(p) for p in paths] or sorted((ROOT / "tests" / "data" / "nccl_tests").glob("*.log"))
    print(f"{'log':<42} {'held out':>8} {'regimes':>7} {'median':>7} {'worst':>7} {'1 line':>7}  "
          f"{'alpha':>9} {'B':>12}  verdict")
    worst_median = 0.0
    for path in logs:
        series = load_series(path)
        pts = sorted(series.samples, key=lambda s: s.size_bytes)
        train, held = pts[0::2], [p for p in pts[1::2] if p.size_bytes >= MiB]
        fit = fit_alpha_beta(train, op=series.op, gpus=series.gpus)
        line = fit_alpha_beta(train, op=series.op, gpus=series.gpus, max_regimes=1)
        c, cl = compare(fit, held), compare(line, held)
        worst_median = max(worst_median, c.median_abs_rel_error)
        verdict = "ok" if c.median_abs_rel_error <= TARGET else "MISSES TARGET"
        print(f"{path.name:<42} {len(held):>8} {len(fit.regimes):>7} {100 * c.median_abs_rel_error:>6.1f}% "
              f"{100 * c.max_abs_rel_error:>6.1f}% {100 * cl.median_abs_rel_error:>6.1f}%  "
              f"{format_seconds(fit.alpha_s):>9} {format_rate(fit.bandwidth_bytes_per_s):>12}  {verdict}")
    print(f"\nheld-out sizes >= {format_bytes(MiB, binary=True)}; target: median |error| <= {100 * TARGET:.0f}% "
          f"per log; worst median here {100 * worst_median:.1f}%")
    return 0 if worst_median <= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
