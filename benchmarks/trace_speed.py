#!/usr/bin/env python3
"""Seconds per 100 MB of Kineto trace: commcost's streaming reader against HTA 0.5.0 (pandas).

Builds one large trace (default ~200 MB of uncompressed JSON) by repeating the events of a
real trace (tests/data/traces/nccl_parser_config__nccl_data.json.gz, 2 ranks of NCCL on A100)
with every timestamp and correlation id shifted per copy, then times, on that one file:

* commcost: ``analyze_trace`` (stream, classify, per-rank and per-step breakdown, collectives);
* HTA: ``TraceAnalysis(trace_dir=...)`` (parse) plus ``get_temporal_breakdown`` and
  ``get_comm_comp_overlap`` (the two figures commcost reproduces).

Prints the file size, each tool's wall and CPU time and CPU seconds per 100 MB, the ratio, each tool's
peak resident memory growth (ru_maxrss of a fresh child process), and the two tools' overlap %
and compute time on the file, so the speed-up is on an identical answer.

    python benchmarks/trace_speed.py [--mb 200]
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "data" / "traces" / "nccl_parser_config__nccl_data.json.gz"

_COMMCOST = """
import json, resource, sys, time
t = time.perf_counter()
from commcost.trace.summary import analyze_trace
r = analyze_trace(sys.argv[1]).ranks[0].total
dt = time.perf_counter() - t
u = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"s": dt, "cpu_s": u.ru_utime + u.ru_stime, "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "overlap_pct": r.overlap_pct, "compute_us": r.compute_s * 1e6}))
"""
_HTA = """
import json, logging, os, resource, sys, time
os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
logging.disable(logging.WARNING)
t = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_dir=sys.argv[1])
b = ta.get_temporal_breakdown(visualize=False)
o = ta.get_comm_comp_overlap(visualize=False)
dt = time.perf_counter() - t
u = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"s": dt, "cpu_s": u.ru_utime + u.ru_stime, "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "overlap_pct": float(o["comp_comm_overlap_pctg"][0]),
                  "compute_us": float(b["compute_time(us)"][0])}))
"""


def build(path: Path, target_mb: float) -> float:
    """Write the repeated trace; return its size in MB (1e6)."""
    obj = json.loads(gzip.decompress(SOURCE.read_bytes()))
    events = obj.pop("traceEvents")
    xs = [e for e in events if "ts" in e]
    span = max(e["ts"] + e.get("dur", 0) for e in xs) - min(e["ts"] for e in xs) + 1000.0
    corr_max = max(e.get("args", {}).get("correlation", 0) for e in xs if isinstance(e.get("args"), dict)) + 1
    one = len(json.dumps(events))
    copies = max(1, round(target_mb * 1e6 / one))
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(obj)[:-1] + ', "traceEvents": [')
        first = True
        for k in range(copies):
            for e in events:
                if "ts" in e:
                    e = dict(e, ts=e["ts"] + k * span)
                    a = e.get("args")
                    if isinstance(a, dict) and "correlation" in a:
                        e["args"] = dict(a, correlation=a["correlation"] + k * corr_max)
                    if isinstance(a, dict) and "External id" in a:
                        e["args"] = dict(e["args"], **{"External id": a["External id"] + k * corr_max})
                fh.write(("" if first else ",\n") + json.dumps(e))
                first = False
        fh.write("]}\n")
    return path.stat().st_size / 1e6


def timed(code: str, arg: str) -> dict:
    r = subprocess.run([sys.executable, "-c", code, arg], capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        raise SystemExit(r.stderr[-2000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=200.0, help="target trace size, MB (1e6 bytes)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "job"
        d.mkdir()
        f = d / "rank0.json"
        mb = build(f, args.mb)
        ours = timed(_COMMCOST, str(f))
        hta = timed(_HTA, str(d))
    print(f"trace: {mb:.1f} MB of JSON ({SOURCE.name} repeated)")
    print(f"{'tool':<10} {'wall s':>8} {'CPU s':>7} {'CPU s per 100 MB':>17} {'peak RSS':>10} {'overlap %':>10} "
          f"{'compute us':>14}")
    for name, r in (("commcost", ours), ("HTA 0.5.0", hta)):
        print(f"{name:<10} {r['s']:8.2f} {r['cpu_s']:7.2f} {100 * r['cpu_s'] / mb:17.2f} {r['rss_kb'] / 1024:8.0f} MB "
              f"{r['overlap_pct']:10.2f} {r['compute_us']:14.1f}")
    print(f"speed-up (HTA CPU seconds / commcost CPU seconds, imports included): {hta['cpu_s'] / ours['cpu_s']:.2f}x; "
          f"peak memory ratio (commcost / HTA): {ours['rss_kb'] / hta['rss_kb']:.2f}")
    print("CPU time, not wall time, is the figure to compare on a shared machine; wall time is shown for reference")


if __name__ == "__main__":
    main()
