"""Direct tests of ``step/sweep.py``: each curve point is the simulated timeline's numbers (closed form
for a uniform stream), the best is on the curve, and a one-bucket point by hand."""

from __future__ import annotations

import pytest

from commcost.comm.link import Link
from commcost.comm.model import FlatLinkModel
from commcost.step.ddp_buckets import DdpBucketCaps
from commcost.step.sweep import curve_point, sweep_buckets
from commcost.step.timeline import TimelineInputs, simulate_timeline

# P = 2 on B = 1e9 B/s, a = 1 ms; S = 2e6 B; t_c = 100 ms (as tests/report/test_timeline_render.py)
INP = TimelineInputs(gpus=2, comm=FlatLinkModel(link=Link(bandwidth_bytes_per_s=1e9, latency_s=1e-3)),
                     step_s=0.1, params=1e6)


def test_one_bucket_point_by_hand():
    # one bucket of S, ready when backward ends at 100 ms: T = 2 ms + 2e6 / 1e9 s = 4 ms exposed; step 104 ms
    p = curve_point(INP, DdpBucketCaps(bucket_cap_bytes=4 * 2**20, first_bucket_cap_bytes=4 * 2**20))
    assert (p.buckets, p.bucket_bytes) == (1, 4 * 2**20)
    assert p.wire_s == pytest.approx(4e-3) and p.exposed_s == pytest.approx(4e-3) and p.step_s == pytest.approx(0.104)


def test_two_buckets_by_hand():
    # caps of 1e6 B: two buckets of 1e6 B, each T = 2 ms + 1 ms = 3 ms; wire 6 ms.
    # backward runs 33.33 -> 100 ms at S / W = 2e6 B / 66.67 ms: the first is ready at 66.67 ms and done at 69.67;
    # the second is ready at 100 ms and done at 103 ms: exposed 3 ms, step 103 ms
    p = curve_point(INP, DdpBucketCaps(bucket_cap_bytes=1_000_000, first_bucket_cap_bytes=1_000_000))
    assert p.buckets == 2 and p.wire_s == pytest.approx(6e-3)
    assert p.exposed_s == pytest.approx(3e-3) and p.step_s == pytest.approx(0.103)


def test_every_point_is_the_simulation():
    inp = TimelineInputs(gpus=32, comm=FlatLinkModel(link=Link(bandwidth_bytes_per_s=25e9, latency_s=20e-6)),
                         step_s=0.4, params=1.3e9)
    sweep = sweep_buckets(inp)
    assert [p.bucket_bytes for p in sweep.curve] == sorted(p.bucket_bytes for p in sweep.curve)
    for p in sweep.curve[:: max(1, len(sweep.curve) // 5)]:
        caps = DdpBucketCaps(bucket_cap_bytes=p.bucket_bytes, first_bucket_cap_bytes=p.bucket_bytes)
        tl = simulate_timeline(inp, caps)
        assert (p.buckets, p.wire_s, p.exposed_s, p.step_s) == pytest.approx(
            (len(tl.buckets), tl.wire_s, tl.exposed_s, tl.step_s), rel=1e-9)
    best = next(p for p in sweep.curve if p.bucket_bytes == sweep.best.bucket_cap_bytes)
    assert best.step_s == pytest.approx(sweep.best.step_s, rel=1e-9)
    assert sweep.advice.recommended_bytes == sweep.best.bucket_cap_bytes
