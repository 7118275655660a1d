"""Each measuring rule pinned on a hand-made trace (times in us in the trace, seconds out)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from commcost.trace.analysis import analyze_rank, breakdown, stragglers
from commcost.trace.classify import COMMUNICATION, COMPUTE, MEMORY, gpu_kind
from commcost.trace.load import load_rank

from _kineto import TraceBuilder

US = 1e-6


def _rank(tmp_path, b: TraceBuilder, name="r.json"):
    return analyze_rank(load_rank(b.write(tmp_path / name)))


def test_overlap_counted_once_across_streams(tmp_path):
    b = TraceBuilder()
    b.compute(0, 100, stream=7)
    b.compute(50, 100, stream=8)      # [50,150): overlaps the first compute kernel
    b.nccl(100, 100, stream=20)       # [100,200)
    b.nccl(120, 40, stream=21)        # [120,160): inside the first NCCL kernel
    t = _rank(tmp_path, b).total
    assert t.compute_s == pytest.approx(150 * US)          # |[0,150)|, not 100 + 100
    assert t.communication_s == pytest.approx(100 * US)    # |[100,200)|, not 100 + 40
    assert t.overlap_s == pytest.approx(50 * US)           # [100,150)
    assert t.exposed_communication_s == pytest.approx(50 * US)  # 100 - 50
    assert t.overlap_pct == pytest.approx(50.0)            # 100 * 50 / 100
    assert t.span_s == pytest.approx(200 * US) and t.idle_s == pytest.approx(0.0)
    assert t.communication_by_op_s == {"all_reduce": pytest.approx(100 * US)}


def test_nested_kernels_add_nothing(tmp_path):
    b = TraceBuilder()
    b.compute(0, 100)
    b.compute(10, 10)                 # nested in [0,100)
    b.nccl(30, 10)                    # [30,40): under compute the whole time
    t = _rank(tmp_path, b).total
    assert t.compute_s == pytest.approx(100 * US)
    assert t.communication_s == pytest.approx(10 * US)
    assert t.overlap_pct == pytest.approx(100.0) and t.exposed_communication_s == pytest.approx(0.0)


def test_idle_and_memory(tmp_path):
    b = TraceBuilder()
    b.compute(0, 10)
    b.kernel("Memcpy HtoD (Pageable -> Device)", 15, 5, cat="gpu_memcpy")  # memory: in the span, not compute
    b.compute(30, 10)
    t = _rank(tmp_path, b).total
    assert t.span_s == pytest.approx(40 * US)               # 40 - 0
    assert t.idle_s == pytest.approx(15 * US)               # 40 - (10 + 5 + 10)
    assert t.compute_s == pytest.approx(20 * US)
    assert t.other_s == pytest.approx(5 * US)               # HTA's non_compute: 40 - 20 - 15
    assert t.overlap_pct is None                            # no communication


def test_classification_rules():
    assert gpu_kind("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)", "kernel") == COMMUNICATION
    assert gpu_kind("ncclDevKernel_Generic", "kernel") == COMMUNICATION
    assert gpu_kind("Memset (Device)", "gpu_memset") == MEMORY
    assert gpu_kind("void at::native::vectorized_elementwise_kernel<4>", "kernel") == COMPUTE
    assert gpu_kind("ncclAllReduce helper", "kernel") == COMPUTE  # no 'Kernel' after nccl: HTA's regex


def test_missing_profiler_step_counts_every_event(tmp_path):
    b = TraceBuilder()
    b.compute(0, 10)
    b.nccl(5, 10)
    r = _rank(tmp_path, b)
    assert r.steps == () and "no ProfilerStep" in r.window
    assert r.total.events == 2 and r.total.overlap_pct == pytest.approx(50.0)  # [5,10) of [5,15)


def test_hta_window_and_steps_by_launch(tmp_path):
    b = TraceBuilder()
    b.step(1, 0, 100)
    b.step(2, 100, 100)
    b.step(3, 200, 100)
    b.compute(10, 50, launch_ts=5)        # step 1
    b.compute(110, 120, launch_ts=90)     # launched in step 1, runs in step 2: belongs to step 1
    b.nccl(150, 30, launch_ts=120)        # step 2
    b.compute(250, 10, launch_ts=210)     # launched in the last step: left out of the totals
    b.events.append({"ph": "X", "cat": "kernel", "name": "orphan", "pid": 0, "tid": 7, "ts": 60, "dur": 5,
                     "args": {"stream": 7, "correlation": 999}})  # no launch in the trace: left out of totals
    r = _rank(tmp_path, b)
    assert "#3" in r.window
    assert r.total.events == 3                                     # the first three kernels
    assert r.total.compute_s == pytest.approx((50 + 120) * US)      # [10,60) + [110,230)
    assert r.total.overlap_pct == pytest.approx(100.0)              # [150,180) under [110,230)
    assert [s.step for s in r.steps] == [1, 2, 3]
    assert r.steps[0].breakdown.compute_s == pytest.approx((50 + 120 + 5) * US)  # orphan by its start (60)
    assert r.steps[1].breakdown.compute_s == 0 and r.steps[1].breakdown.communication_s == pytest.approx(30 * US)
    assert r.steps[2].breakdown.compute_s == pytest.approx(10 * US)
    assert r.steps[1].duration_s == pytest.approx(100 * US)


def test_trace_without_any_launch_counts_by_start(tmp_path):
    b = TraceBuilder()
    b.step(1, 0, 100)
    b.step(2, 100, 100)
    b.compute(10, 50)
    b.compute(150, 20)                    # starts in the last step: left out
    b.events = [e for e in b.events if e["cat"] != "cuda_runtime"]
    r = _rank(tmp_path, b)
    assert r.total.events == 1 and r.total.compute_s == pytest.approx(50 * US)


def test_stragglers_and_a_rank_without_communication(tmp_path):
    r0 = TraceBuilder(rank=0)
    r0.step(1, 0, 100)
    r0.step(2, 100, 120)
    r0.compute(0, 50)
    r0.nccl(40, 20)
    r1 = TraceBuilder(rank=1)
    r1.step(1, 0, 130)
    r1.step(2, 130, 100)
    r1.compute(0, 50)                      # no communication on this rank
    a = _rank(tmp_path, r0, "a.json")
    b = _rank(tmp_path, r1, "b.json")
    assert b.total.communication_s == 0 and b.total.overlap_pct is None and b.total.exposed_communication_s == 0
    s = stragglers([a, b])
    assert [x.step for x in s.steps] == [1, 2]
    assert s.steps[0].spread_s == pytest.approx(30 * US) and s.steps[0].slowest_rank == 1   # 130 - 100
    assert s.steps[1].spread_s == pytest.approx(20 * US) and s.steps[1].slowest_rank == 0   # 120 - 100
    assert s.mean_step_s[0] == pytest.approx(110 * US) and s.mean_step_s[1] == pytest.approx(115 * US)
    assert s.slowest_rank == 1                                                              # 115 > 110


def test_cpu_only_trace_uses_gloo_annotations(tmp_path):
    b = TraceBuilder(backend="gloo")
    ev = b.events
    ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 100})
    ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 20, "dur": 10})  # nested
    ev.append({"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 1, "tid": 1, "ts": 100, "dur": 80})
    ev.append({"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 1, "tid": 5, "ts": 60,
               "dur": 100, "args": {"Input Dims": [[1000]], "Input type": ["float"]}})
    ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 1, "tid": 5, "ts": 70, "dur": 5})  # gloo thread
    r = _rank(tmp_path, b)
    assert r.device == "cpu"
    t = r.total
    assert t.compute_s == pytest.approx(100 * US)        # aten::mm [0,100); c10d op and gloo-thread op not compute
    assert t.communication_s == pytest.approx(100 * US)  # [60,160)
    assert t.overlap_pct == pytest.approx(40.0)          # [60,100) of 100
    assert t.exposed_communication_s == pytest.approx(60 * US)


_kernel = st.tuples(st.integers(0, 1000), st.integers(0, 200), st.sampled_from([COMPUTE, COMMUNICATION, MEMORY]))


@settings(max_examples=150, deadline=None)
@given(st.lists(_kernel, max_size=25))
def test_breakdown_invariants(ks):
    b = breakdown((s * US, (s + d) * US, kind, None) for s, d, kind in ks)
    eps = 1e-12
    assert -eps <= b.exposed_communication_s <= b.communication_s + eps
    assert b.overlap_s + b.exposed_communication_s == pytest.approx(b.communication_s, abs=eps)
    assert b.overlap_s <= min(b.compute_s, b.communication_s) + eps
    assert b.compute_s + b.communication_s - b.overlap_s <= b.span_s - b.idle_s + eps   # |K u M| <= |A|
    assert b.idle_s >= 0 and b.idle_s <= b.span_s + eps
    assert b.compute_s + b.idle_s + b.other_s == pytest.approx(b.span_s, abs=eps)
    if b.overlap_pct is not None:
        assert 0 <= b.overlap_pct <= 100 + 1e-9
