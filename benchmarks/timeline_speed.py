#!/usr/bin/env python3
"""Speed of the DDP timeline: a 70B-parameter model with 25 MiB buckets.

Target: well under 50 ms for the thousands of buckets of a 70B model.
Prints, from one run: buckets, best-of-N wall time, time per bucket, and the
ratio to the 50 ms target; for the uniform-rate stream (no shape: 5,341 buckets),
the llama2-70b shape (DDP never splits a tensor, so fewer, larger buckets), and
the ``--bucket auto`` sweep of both.

    python benchmarks/timeline_speed.py
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "src"))

from commcost.comm.model import FlatLinkModel
from commcost.step.ddp_buckets import ddp_bucket_caps  # noqa: E402
from commcost.step.sweep import sweep_buckets  # noqa: E402
from commcost.step.timeline import TimelineInputs, simulate_timeline  # noqa: E402
from commcost.comm.topology import Link  # noqa: E402
from commcost.workload.shape import model_preset  # noqa: E402

TARGET_S = 0.050
REPEATS = 7


def best_of(fn):
    times = []
    result = None
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return min(times), result


def main() -> int:
    link = Link(bandwidth_bytes_per_s=25e9, latency_s=20e-6)
    spec, seq = model_preset("llama2-70b")
    cases = {
        "70B uniform rate": TimelineInputs(gpus=256, comm=FlatLinkModel(link=link), step_s=4.0, params=70e9),
        "llama2-70b shape": TimelineInputs(gpus=256, comm=FlatLinkModel(link=link), step_s=4.0, shape=spec, seq=seq),
    }
    caps = ddp_bucket_caps(25)
    print(f"{'case':<34} {'buckets':>8} {'wall (best of %d)' % REPEATS:>18} {'per bucket':>11} {'target/wall':>12}")
    for name, inp in cases.items():
        wall, tl = best_of(lambda: simulate_timeline(inp, caps))
        n = len(tl.buckets)
        print(f"{name + ', 25 MiB':<34} {n:>8,} {wall * 1e3:>15.2f} ms {wall / n * 1e6:>8.2f} us "
              f"{TARGET_S / wall:>11.1f}x")
        wall, sw = best_of(lambda: sweep_buckets(inp))
        n = sum(p.buckets for p in sw.curve)
        print(f"{name + ', auto (%d caps)' % len(sw.curve):<34} {n:>8,} {wall * 1e3:>15.2f} ms "
              f"{wall / n * 1e6:>8.2f} us {TARGET_S / wall:>11.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
