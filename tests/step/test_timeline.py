"""The DDP bucket timeline: hand-computed cases and invariants."""

import math

import pytest
from hypothesis import given, settings, strategies as st

from commcost.comm.model import FlatLinkModel
from commcost.comm.collectives import ring_all_reduce
from commcost.step.ddp_buckets import DdpBucketCaps
from commcost.core.errors import InputError
from commcost.step.sweep import sweep_buckets
from commcost.step.timeline import TimelineInputs, bucket_grid, gradient_stream, simulate_timeline
from commcost.comm.topology import Link
from commcost.workload.transformer import TransformerSpec

# Hand cases: P = 2, a = 1 ms, so T(c) = 2(P-1)a + 2(P-1)/P c/B = 2 ms + c/B.
# N = 50e6 bf16 -> S = 100e6 B; step 0.3 s, f_b = 2/3 -> W = 0.2 s, t_0 = 0.1 s;
# gradients arrive at S/W = 500e6 B/s, so a 10e6 B bucket fills in 0.02 s.
TEN_MB = DdpBucketCaps(bucket_cap_bytes=10_000_000, first_bucket_cap_bytes=10_000_000)


def _inp(bw_bytes_per_s, **kw):
    base = dict(gpus=2, comm=FlatLinkModel(link=Link(bandwidth_bytes_per_s=bw_bytes_per_s, latency_s=1e-3)),
                step_s=0.3, params=50e6)
    base.update(kw)
    return TimelineInputs(**base)


def test_comm_keeps_up_exposed_is_the_last_buckets_all_reduce():
    # B = 1e9: T(10e6) = 0.002 + 0.01 = 0.012 s < 0.02 s fill: each bucket starts when ready.
    # 10 buckets; the last is ready at 0.3 and ends at 0.312. wire = 10 * 0.012 = 0.12.
    tl = simulate_timeline(_inp(1e9), TEN_MB)
    assert len(tl.buckets) == 10
    assert [b.size_bytes for b in tl.buckets] == [10e6] * 10
    assert tl.buckets[0].ready_s == pytest.approx(0.12)
    assert tl.buckets[0].start_s == pytest.approx(0.12) and tl.buckets[0].end_s == pytest.approx(0.132)
    assert tl.wire_s == pytest.approx(0.12)
    assert tl.exposed_s == pytest.approx(0.012)
    assert tl.step_s == pytest.approx(0.312)
    assert tl.overlap_fraction == pytest.approx((0.12 - 0.012) / 0.12)  # 0.9
    assert tl.efficiency == pytest.approx(0.3 / 0.312)
    assert tl.no_overlap_s == pytest.approx(0.42)       # 0.3 + 0.12
    assert tl.perfect_overlap_s == pytest.approx(0.3)   # 0.3 + max(0, 0.12 - 0.2)


def test_comm_saturates_exposed_is_total_minus_backward_plus_first_fill():
    # B = 0.25e9: T(10e6) = 0.002 + 0.04 = 0.042 s > 0.02 s fill: back to back from the first.
    # first ready 0.1 + 0.02 = 0.12; end = 0.12 + 10 * 0.042 = 0.54;
    # exposed = 0.54 - 0.3 = 0.24 = T_w - W + fill = 0.42 - 0.2 + 0.02
    tl = simulate_timeline(_inp(0.25e9), TEN_MB)
    assert tl.wire_s == pytest.approx(0.42)
    assert tl.exposed_s == pytest.approx(0.42 - 0.2 + 0.02)
    assert tl.step_s == pytest.approx(0.54)
    assert tl.perfect_overlap_s == pytest.approx(0.3 + 0.22)
    assert tl.no_overlap_s == pytest.approx(0.72)


def test_small_first_bucket_starts_early_then_waits_for_the_second():
    # first cap 1e6: sizes 1e6, 9 x 10e6, 9e6 (remainder). T: 0.006, 0.042, 0.038.
    # bucket 1 ready 0.1 + 1e6/500e6 = 0.102, ends 0.108; bucket 2 ready 0.1 + 11e6/500e6 = 0.122 (idle gap)
    # then back to back: 0.122 + 9 * 0.042 + 0.038 = 0.538 -> exposed 0.238; wire 0.006 + 0.378 + 0.038 = 0.422
    caps = DdpBucketCaps(bucket_cap_bytes=10_000_000, first_bucket_cap_bytes=1_000_000)
    tl = simulate_timeline(_inp(0.25e9), caps)
    assert [b.size_bytes for b in tl.buckets] == [1e6] + [10e6] * 9 + [9e6]
    assert tl.buckets[0].end_s == pytest.approx(0.108)
    assert tl.buckets[1].start_s == pytest.approx(0.122)
    assert tl.wire_s == pytest.approx(0.422)
    assert tl.exposed_s == pytest.approx(0.238)


def test_one_gpu_has_nothing_to_communicate():
    tl = simulate_timeline(_inp(1e9, gpus=1, optimizer_s=0.05), TEN_MB)
    assert tl.wire_s == 0 and tl.exposed_s == 0
    assert tl.step_s == pytest.approx(0.35)   # 0.3 compute + 0.05 optimizer
    assert tl.overlap_fraction == 1.0
    assert tl.efficiency == 1.0


def test_grad_accumulation_only_the_last_backward_overlaps():
    # k = 4: t_e = 1.2, t_0 = 1.1; the keeps-up case shifted by 0.9 s: exposed 0.012, step 1.212 (+0.05 optimizer)
    tl = simulate_timeline(_inp(1e9, grad_accum=4, optimizer_s=0.05), TEN_MB)
    assert len(tl.buckets) == 10                       # O(buckets), not O(micro-batches)
    assert tl.backward_start_s == pytest.approx(1.0)
    assert tl.buckets[-1].ready_s == pytest.approx(1.2)
    assert tl.exposed_s == pytest.approx(0.012)
    assert tl.step_s == pytest.approx(1.262)
    assert tl.efficiency == pytest.approx(1.25 / 1.262)


def test_tiny_shape_ready_times_follow_backward_flops():
    # L=1, h=2, s=1, V=3, f=4h=8, untied, no biases. Tensors (elements):
    #   embedding 6; layer: ln1 2, Q 4, K 4, V 4, O 4, ln2 2, up 16, down 16 (52); final norm 2; head 6
    # backward FLOPs/token: layer 4*(2*4 + 2*4 + 2*16) + 8*2*1 = 208; head 4*3*2 = 24; total 232
    # ready (share of W): head 24/232; final norm 24/232; down (24 + 208*16/52)/232 = 88/232;
    #   up (24+128)/232; ln2 (24+136)/232; O 160+16 -> 176/232; V 192; K 208; Q 224; ln1 232; embedding 1
    shape = TransformerSpec(layers=1, hidden=2, heads=1, vocab=3)
    s = gradient_stream(TimelineInputs(gpus=2, comm=FlatLinkModel(link=Link(bandwidth_bytes_per_s=1e9, latency_s=0)),
                                       step_s=1.0, shape=shape, seq=1, bytes_per_grad=2))
    assert s.tensor_bytes == tuple(2 * n for n in (6, 2, 16, 16, 2, 4, 4, 4, 4, 2, 6))
    expected = [24, 24, 88, 152, 160, 176, 192, 208, 224, 232, 232]
    assert s.ready_fraction == pytest.approx([e / 232 for e in expected])
    assert s.total_bytes == 2 * 66


def test_tied_embedding_gradient_is_ready_last_and_head_has_no_tensor():
    shape = TransformerSpec(layers=2, hidden=8, heads=1, vocab=100, tied_embeddings=True)
    s = gradient_stream(TimelineInputs(gpus=2, comm=FlatLinkModel(link=Link(bandwidth_bytes_per_s=1e9, latency_s=0)),
                                       step_s=1.0, shape=shape, seq=4))
    assert s.tensor_bytes[-1] == 2 * 100 * 8 and s.ready_fraction[-1] == 1.0
    assert s.tensor_bytes[0] == 2 * 8         # final norm first: no head tensor


def test_sweep_finds_the_minimum_of_its_curve_and_both_sides_are_worse():
    # the drill: P = 32, B = 25 GB/s, a = 20 us, N = 1.3e9, step 400 ms
    inp = TimelineInputs(gpus=32, comm=FlatLinkModel(link=Link(bandwidth_bytes_per_s=25e9, latency_s=20e-6)),
                         step_s=0.4, params=1.3e9)
    sw = sweep_buckets(inp)
    steps = [p.step_s for p in sw.curve]
    assert sw.best.step_s == min(steps)
    i = steps.index(min(steps))
    assert 0 < i < len(steps) - 1              # latency side on the left, tail side on the right
    assert sw.curve[0].step_s > sw.best.step_s and sw.curve[-1].step_s > sw.best.step_s
    assert sw.curve[-1].buckets == 1
    # one bucket = everything after backward: 0.4 + T(S)
    assert sw.curve[-1].step_s == pytest.approx(0.4 + ring_all_reduce(2.6e9, 32, inp.comm.flat_link).total_s)


def test_bucket_grid_is_log_spaced_and_reaches_the_whole_gradient():
    grid = bucket_grid(100e6, points_per_octave=2, min_bytes=1e6)
    assert grid[0] <= 1e6 and grid[-1] >= 100e6 and grid[-2] < 100e6
    ratios = [b / a for a, b in zip(grid, grid[1:])]
    assert all(r == pytest.approx(math.sqrt(2), rel=1e-3) for r in ratios)


def test_bad_inputs_raise_input_error():
    link = Link(bandwidth_bytes_per_s=1e9, latency_s=0)
    with pytest.raises(InputError, match="backward_fraction"):
        TimelineInputs(gpus=2, comm=FlatLinkModel(link=link), step_s=1, params=1, backward_fraction=1.5)
    with pytest.raises(InputError, match="grad_accum"):
        TimelineInputs(gpus=2, comm=FlatLinkModel(link=link), step_s=1, params=1, grad_accum=0)
    with pytest.raises(InputError, match="params"):
        TimelineInputs(gpus=2, comm=FlatLinkModel(link=link), step_s=1)
    with pytest.raises(InputError, match="optimizer_s"):
        TimelineInputs(gpus=2, comm=FlatLinkModel(link=link), step_s=1, params=1, optimizer_s=-1)


_inputs = st.builds(
    dict,
    gpus=st.integers(1, 512), bw=st.floats(1e8, 1e12), lat=st.floats(0, 1e-4),
    params=st.floats(1e5, 1e11), step=st.floats(1e-3, 10), fb=st.floats(0.05, 1.0),
    k=st.integers(1, 64), opt=st.floats(0, 1), cap=st.integers(2**10, 2**31), first=st.integers(2**10, 2**31),
)


def _build(d, shape=None, seq=0):
    inp = TimelineInputs(gpus=d["gpus"], comm=FlatLinkModel(link=Link(bandwidth_bytes_per_s=d["bw"], latency_s=d["lat"])),
                         step_s=d["step"], params=d["params"], shape=shape, seq=seq, backward_fraction=d["fb"],
                         grad_accum=d["k"], optimizer_s=d["opt"])
    return inp, DdpBucketCaps(bucket_cap_bytes=d["cap"], first_bucket_cap_bytes=d["first"])


def _check_invariants(tl):
    eps = 1e-9 * max(1.0, tl.no_overlap_s)
    assert 0 <= tl.exposed_s <= tl.wire_s + eps
    assert tl.perfect_overlap_s - eps <= tl.step_s <= tl.no_overlap_s + eps
    assert 0 <= tl.overlap_fraction <= 1 + 1e-12
    assert 0 < tl.efficiency <= 1
    assert sum(b.size_bytes for b in tl.buckets) == pytest.approx(tl.message_bytes)
    for prev, b in zip(tl.buckets, tl.buckets[1:]):
        assert b.start_s >= prev.end_s - eps and b.start_s >= b.ready_s - eps
        assert b.ready_s >= prev.ready_s - eps


@settings(max_examples=150, deadline=None)
@given(_inputs)
def test_invariants_uniform_rate(d):
    d["params"] = min(d["params"], d["cap"] * 2000.0)   # keep the bucket count modest
    inp, caps = _build(d)
    _check_invariants(simulate_timeline(inp, caps))


@settings(max_examples=60, deadline=None)
@given(_inputs, st.integers(1, 6), st.integers(1, 64), st.integers(1, 64), st.integers(2, 5000),
       st.booleans(), st.booleans())
def test_invariants_with_a_model_shape(d, layers, hidden, seq, vocab, tied, gated):
    shape = TransformerSpec(layers=layers, hidden=hidden, heads=1, vocab=vocab, tied_embeddings=tied, gated_mlp=gated)
    inp, caps = _build(d, shape, seq)
    _check_invariants(simulate_timeline(inp, caps))


@settings(max_examples=100, deadline=None)
@given(_inputs)
def test_one_giant_bucket_step_is_compute_plus_T(d):
    inp, _ = _build(d)
    S = inp.message_bytes
    giant = DdpBucketCaps(bucket_cap_bytes=int(S) + 1, first_bucket_cap_bytes=int(S) + 1)
    tl = simulate_timeline(inp, giant)
    T = ring_all_reduce(S, inp.gpus, inp.comm.flat_link).total_s
    assert len(tl.buckets) == 1
    assert tl.step_s == pytest.approx(d["k"] * d["step"] + T + d["opt"], rel=1e-12)
    assert tl.step_s == pytest.approx(tl.no_overlap_s, rel=1e-12)
