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

Then a whole job: ``--ranks N`` files of ``--rank-mb`` MB each (the same real trace, each file
another rank, its clock shifted by ``rank`` ms), read by ``analyze_trace`` serially and on
``--workers`` local processes (:mod:`commcost.trace.parallel`), each in a fresh child process:
wall time, throughput (MB of JSON per wall second), the peak resident memory of each process that
read ranks (``ru_maxrss`` when its last task ended), and whether the two JSON reports are identical.
CPU time is the serial process's, and for the workers the sum of their own (each worker's CPU time
when its last task ended, imports included; the parent's combining is not in it: the workers are
the forkserver's children, so ``RUSAGE_CHILDREN`` does not see them). On a machine shared with
other work, wall time understates the speed-up and equal CPU seconds per 100 MB show the work
did not grow.

Per-byte cost against size (``--scaling 200,1000``): one trace of each size (MB), read by
``analyze_trace`` in fresh child processes, the sizes alternated ``--repeat`` times (so machine noise
hits both alike), with the cyclic collector's share of the time. Prints each size's median CPU seconds
per 100 MB and the ratio of the largest to the smallest: flat per-byte cost is a ratio near 1 (issue
37: within 1.1x from 200 MB to 1 GB). The machine's core count is printed with it.

    python benchmarks/trace_speed.py [--mb 200] [--ranks 8 --rank-mb 25 --workers 2] [--skip-hta]
    python benchmarks/trace_speed.py --skip-hta --ranks 0 --scaling 200,1000 [--repeat 3]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
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
_SCALING = """
import gc, json, resource, sys, time
gc_s = [0.0, 0.0]
def on_gc(phase, info):
    if phase == "start":
        gc_s[1] = time.process_time()
    else:
        gc_s[0] += time.process_time() - gc_s[1]
gc.callbacks.append(on_gc)
t = time.process_time()
from commcost.trace.summary import analyze_trace
s = analyze_trace(sys.argv[1])
cpu = time.process_time() - t
print(json.dumps({"cpu_s": cpu, "gc_s": gc_s[0], "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
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


_JOB = """
import hashlib, json, resource, sys, time
t = time.perf_counter()
import commcost.trace.summary as S
from commcost.report.trace import trace_to_dict
seen = []
run = S.run_ranks
def spy(*a, **k):
    out = run(*a, **k)
    seen.extend(out)
    return out
S.run_ranks = spy
s = S.analyze_trace(sys.argv[1], workers=int(sys.argv[2]))
dt = time.perf_counter() - t
text = json.dumps(trace_to_dict(s), sort_keys=True)
peak, cpu = {}, {}
for r in seen:
    peak[r.worker_pid] = max(peak.get(r.worker_pid, 0), r.worker_peak_rss_bytes)
    cpu[r.worker_pid] = max(cpu.get(r.worker_pid, 0.0), r.worker_cpu_s)
u = resource.getrusage(resource.RUSAGE_SELF)
cpu_s = sum(cpu.values()) if len(cpu) > 1 or sys.argv[2] != "1" else u.ru_utime + u.ru_stime
print(json.dumps({"s": dt, "cpu_s": cpu_s, "sha": hashlib.sha256(text.encode()).hexdigest(), "ranks": len(s.ranks),
                  "instances": len(s.cross.instances) if s.cross else 0,
                  "peak_rss_bytes": sorted(peak.values())}))
"""


def build(path: Path, target_mb: float, *, rank: int = 0, shift_us: float = 0.0) -> float:
    """Write the repeated trace (as rank ``rank``, every timestamp ``+ shift_us``); return its size in MB (1e6)."""
    obj = json.loads(gzip.decompress(SOURCE.read_bytes()))
    if isinstance(obj.get("distributedInfo"), dict):
        obj["distributedInfo"]["rank"] = rank
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
                    e = dict(e, ts=e["ts"] + k * span + shift_us)
                    a = e.get("args")
                    if isinstance(a, dict) and "correlation" in a:
                        e["args"] = dict(a, correlation=a["correlation"] + k * corr_max)
                    if isinstance(a, dict) and "External id" in a:
                        e["args"] = dict(e["args"], **{"External id": a["External id"] + k * corr_max})
                fh.write(("" if first else ",\n") + json.dumps(e))
                first = False
        fh.write("]}\n")
    return path.stat().st_size / 1e6


def timed(code: str, *args: str) -> dict:
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        raise SystemExit(r.stderr[-2000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=200.0, help="target trace size, MB (1e6 bytes)")
    ap.add_argument("--ranks", type=int, default=8, help="rank files in the job directory (0: skip the job)")
    ap.add_argument("--rank-mb", type=float, default=25.0, help="size of each rank's file, MB (1e6 bytes)")
    ap.add_argument("--workers", type=int, default=2, help="local processes for the parallel read")
    ap.add_argument("--skip-hta", action="store_true", help="only the job part (no single-file comparison)")
    ap.add_argument("--scaling", metavar="MB,MB", help="CPU seconds per 100 MB at each size, and their ratio")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each size with --scaling (median)")
    args = ap.parse_args()
    if not args.skip_hta:
        single(args.mb)
    if args.ranks > 0:
        job(args.ranks, args.rank_mb, args.workers)
    if args.scaling:
        scaling([float(x) for x in args.scaling.split(",")], args.repeat)


def scaling(sizes_mb: list[float], repeat: int) -> None:
    """CPU seconds per 100 MB of ``analyze_trace`` at each size, and the largest's over the smallest's
    (module docstring)."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    with tempfile.TemporaryDirectory() as tmp:
        files = {mb: Path(tmp) / f"t{mb:g}.json" for mb in sizes_mb}
        real = {mb: build(f, mb) for mb, f in files.items()}
        runs: dict[float, list[dict]] = {mb: [] for mb in sizes_mb}
        for _ in range(repeat):  # interleaved
            for mb, f in files.items():
                runs[mb].append(timed(_SCALING, str(f)))
    print(f"per-byte cost against size: {os.cpu_count()} cores ({usable} usable), median of {repeat} runs "
          "each, fresh processes, CPU seconds (imports included)")
    print(f"{'MB of JSON':>10} {'CPU s':>8} {'CPU s per 100 MB':>17} {'of it GC':>9} {'peak RSS':>10}")
    per = {}
    for mb in sizes_mb:
        cpu = statistics.median(r["cpu_s"] for r in runs[mb])
        gc_s = statistics.median(r["gc_s"] for r in runs[mb])
        rss = max(r["rss_kb"] for r in runs[mb]) / 1024
        per[mb] = 100 * cpu / real[mb]
        print(f"{real[mb]:10.1f} {cpu:8.2f} {per[mb]:17.3f} {100 * gc_s / real[mb]:9.3f} {rss:7.0f} MB")
    lo, hi = min(sizes_mb), max(sizes_mb)
    ratio = per[hi] / per[lo]
    print(f"CPU s per 100 MB at {real[hi]:.0f} MB / at {real[lo]:.0f} MB: {ratio:.3f}x "
          f"(target <= 1.1x): {'OK' if ratio <= 1.1 else 'OVER'}")


def job(ranks: int, rank_mb: float, workers: int) -> None:
    """Serial vs ``workers`` processes on a directory of ``ranks`` rank files (module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "job"
        d.mkdir()
        mb = sum(build(d / f"rank{r}.json", rank_mb, rank=r, shift_us=1000.0 * r) for r in range(ranks))
        serial = timed(_JOB, str(d), "1")
        parallel = timed(_JOB, str(d), str(workers))
    print()
    print(f"job: {ranks} rank files, {mb:.1f} MB of JSON in all ({mb / ranks:.1f} MB each), "
          f"{serial['instances']} collective instances matched")
    print(f"{'read':<22} {'wall s':>8} {'MB/s':>8} {'CPU s':>7} {'CPU s per 100 MB':>17} "
          f"{'peak RSS per process (MB)':>26}")
    for name, r in (("serial (1 process)", serial), (f"{workers} worker processes", parallel)):
        peaks = ", ".join(f"{p / 2**20:.0f}" for p in r["peak_rss_bytes"])
        print(f"{name:<22} {r['s']:8.2f} {mb / r['s']:8.1f} {r['cpu_s']:7.2f} {100 * r['cpu_s'] / mb:17.2f} "
              f"{peaks:>26}")
    print(f"speed-up (serial wall / parallel wall): {serial['s'] / parallel['s']:.2f}x; "
          f"JSON identical: {'yes' if serial['sha'] == parallel['sha'] else 'NO'}")


def single(target_mb: float) -> None:
    """The single-file comparison with HTA (module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "job"
        d.mkdir()
        f = d / "rank0.json"
        mb = build(f, target_mb)
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
