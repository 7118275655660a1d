"""Collective calls from record_param_comms, matched across ranks; busbw; the measurement export."""

from __future__ import annotations

import pytest

from commcost.calibrate.data import load_series, write_measurement
from commcost.comm.collectives import Collective
from commcost.trace.collectives import CollectiveCall, collective_calls, collective_rows, rows_to_measurement
from commcost.trace.load import load_rank

from _kineto import TraceBuilder

US = 1e-6


def test_call_size_kernel_and_bandwidths(tmp_path):
    b = TraceBuilder(world_size=8)
    b.param_comms(100, 20, nelems_in=1_000_000, dtype="BFloat16", group=4)    # all-reduce of 2,000,000 B
    b.nccl(130, 50, launch_ts=110)                                             # launched inside the op
    b.param_comms(300, 20, nelems_in=250_000, nelems_out=1_000_000, dtype="Float", group=4, name="_allgather_base")
    b.nccl(330, 80, op="AllGather", launch_ts=310)
    b.param_comms(500, 20, nelems_in=10)                                       # no kernel in the trace: dropped
    calls, dropped = collective_calls(load_rank(b.write(tmp_path / "t.json")))
    assert dropped == 1
    ar, ag = calls
    assert (ar.op, ar.size_bytes, ar.group_size, ar.dtype) == (Collective.ALL_REDUCE, 2_000_000, 4, "BFloat16")
    assert ar.time_s == pytest.approx(50 * US)
    # all-gather: S = the full output = max(250,000, 1,000,000) elements * 4 B
    assert (ag.op, ag.size_bytes) == (Collective.ALL_GATHER, 4_000_000)
    rows = collective_rows(calls)
    r = next(r for r in rows if r.op is Collective.ALL_REDUCE)
    assert r.algbw_bytes_per_s == pytest.approx(2e6 / 50e-6)                  # S / t = 40 GB/s
    assert r.busbw_bytes_per_s == pytest.approx(2e6 / 50e-6 * 2 * 3 / 4)      # * 2(P-1)/P = 1.5 -> 60 GB/s
    g = next(r for r in rows if r.op is Collective.ALL_GATHER)
    assert g.busbw_bytes_per_s == pytest.approx(4e6 / 80e-6 * 3 / 4)          # * (P-1)/P


def test_old_traces_input_dims_c10d_parent_and_world_size(tmp_path):
    b = TraceBuilder(world_size=16)
    b.events.append({"ph": "X", "cat": "cpu_op", "name": "c10d::alltoall_base_", "pid": 1, "tid": 1, "ts": 90,
                     "dur": 60})
    b.events.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 100,
                     "dur": 20, "args": {"Input Dims": [[1024, 8]], "Input type": ["c10::Half"]}})
    b.nccl(130, 40, op="SendRecv", launch_ts=105)
    calls, _ = collective_calls(load_rank(b.write(tmp_path / "t.json")))
    (c,) = calls
    # op from the enclosing c10d op (the kernel says SendRecv), S = 1024 * 8 * 2 B, P = world size
    assert (c.op, c.size_bytes, c.group_size, c.group_size_source) == (Collective.ALL_TO_ALL, 16_384, 16, "world_size")


def _c10d(b, ts, dur, numel, tid=1):
    b.events.append({"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 1, "tid": tid, "ts": ts,
                     "dur": dur, "args": {"Input type": ["TensorList", "", "", "", "Scalar", "Scalar"],
                                          "Input Dims": [[[numel]], [], [], [], [], []]}})


def _gloo(b, ts, dur, numel, tid):
    b.events.append({"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 1, "tid": tid,
                     "ts": ts, "dur": dur, "args": {"Input Dims": [[numel]], "Input type": ["float"]}})


def test_gloo_calls_in_issue_order_when_the_worker_threads_start_them_out_of_order(tmp_path):
    # The pattern of a DDP step over gloo (tests/trace/test_trace_ddp_gloo.py, one run in ~15 on 2
    # loaded cores): the caller (thread 1) queues bucket 0 (99,978 floats) at 5394 us and bucket 1
    # (16,640) at 5606 us; gloo's two worker threads pop them in that order, but the one holding
    # bucket 1 (thread 26) begins first, at 5677 us, and the other (thread 27) at 5698 us.
    # Then a second step in the usual order, each bucket on the other thread.
    b = TraceBuilder(backend="gloo")
    _c10d(b, 5394, 41, 99_978)
    _c10d(b, 5606, 25, 16_640)
    _gloo(b, 5677, 4617, 16_640, tid=26)
    _gloo(b, 5698, 8459, 99_978, tid=27)
    _c10d(b, 17604, 3718, 99_978)
    _gloo(b, 20690, 1741, 99_978, tid=26)
    _c10d(b, 21634, 40, 16_640)
    _gloo(b, 22217, 378, 16_640, tid=27)
    calls, dropped = collective_calls(load_rank(b.write(tmp_path / "t.json")))
    assert dropped == 0
    # issue order: bucket 0, bucket 1, bucket 0, bucket 1 (sizes * 4 B), each at its c10d op's start
    assert [c.size_bytes for c in calls] == [399_912, 66_560, 399_912, 66_560]
    assert [round(c.issue_s / US) for c in calls] == [0, 5606 - 5394, 17604 - 5394, 21634 - 5394]
    # start and time stay the annotation's own: bucket 1 of step 1 did begin first
    assert [round(c.start_s / US) for c in calls] == [5698 - 5394, 5677 - 5394, 20690 - 5394, 22217 - 5394]
    assert [c.time_s for c in calls] == [pytest.approx(t * US) for t in (8459, 4617, 1741, 378)]


def test_gloo_issue_pairing_same_size_fifo_and_fallback(tmp_path):
    # Two works of one size queued 10 us apart both begin after the second was queued: the k-th
    # annotation of that size pairs with the k-th queued op (FIFO), not the latest one before it.
    # An annotation whose c10d op is not in the trace (queued before the profiler started) and a
    # c10d op nested in another on the caller's thread (not a second issue) keep the pairing exact.
    b = TraceBuilder(backend="gloo")
    _gloo(b, 0, 5, 256, tid=26)                        # no c10d op before it: keeps its own start
    _c10d(b, 100, 8, 256)
    _c10d(b, 102, 4, 256)                              # nested in the one above: not an issue of its own
    _c10d(b, 110, 5, 256)
    _gloo(b, 120, 50, 256, tid=27)
    _gloo(b, 121, 50, 256, tid=26)
    _c10d(b, 140, 5, 256, tid=26)                      # on a gloo worker thread: never an issuer
    calls, _ = collective_calls(load_rank(b.write(tmp_path / "t.json")))
    assert [round(c.issue_s / US) for c in calls] == [0, 100, 110]
    assert [round(c.start_s / US) for c in calls] == [0, 120, 121]


def _call(rank, start, t):
    return CollectiveCall(rank=rank, op=Collective.ALL_REDUCE, size_bytes=1000, dtype="Float", group_size=2,
                          group_size_source="Group size", start_s=start, issue_s=start, time_s=t)


def test_calls_matched_across_ranks_take_the_fastest():
    calls = [_call(0, 1, 10.0), _call(0, 2, 12.0), _call(1, 1, 4.0), _call(1, 2, 20.0)]
    (r,) = collective_rows(calls)
    # call 1: min(10, 4) = 4; call 2: min(12, 20) = 12; median(4, 12) = 8; every call: median(4, 10, 12, 20) = 11
    assert r.time_s == 8.0 and r.time_min_s == 4.0 and r.time_max_s == 12.0
    assert r.time_all_calls_median_s == 11.0 and r.count == 4 and r.ranks == 2


def test_measurement_round_trip_through_fit_reader(tmp_path):
    calls = [_call(0, i, 1e-4 * (1 + i % 2)) for i in range(4)]
    calls += [CollectiveCall(rank=0, op=Collective.ALL_REDUCE, size_bytes=8000, dtype="Float", group_size=2,
                             group_size_source="Group size", start_s=9, issue_s=9, time_s=3e-4)]
    m = rows_to_measurement(collective_rows(calls), {"source": "hand"})
    assert [(r.size_bytes, r.count, r.iters) for r in m.rows] == [(1000, 250, 4), (8000, 2000, 1)]
    p = tmp_path / "m.csv"
    write_measurement(m, p)
    series = load_series(p)
    assert series.op is Collective.ALL_REDUCE and series.gpus == 2
    assert [(s.size_bytes, s.time_s) for s in series.samples] == [(1000, pytest.approx(1.5e-4)), (8000, 3e-4)]


# --- issue 24 item 8: impossible arguments are left out, never printed as results -----------------

@pytest.mark.parametrize("args", [
    {"nelems_in": -1_048_576},                      # printed as S = -4.19 MB, algbw -83.89 GB/s before
    {"nelems_in": 10**400},                         # past 1 EiB
    {"nelems_in": 2**59},                           # 2**59 floats = 2**61 B > 1 EiB
    {"nelems_in": 1000, "group": True},             # a boolean is not a group size
    {"nelems_in": 1000, "group": 10**30},
    {"nelems_in": 1000, "group": -3},
    {"nelems_in": 1000, "group": 1e30},
])
def test_impossible_call_arguments_are_dropped(tmp_path, args):
    b = TraceBuilder(world_size=8)
    b.param_comms(100, 20, nelems_in=1000, group=4)                  # a good call ...
    b.nccl(130, 50, launch_ts=110)
    b.param_comms(300, 20, **args)                                   # ... and an impossible one
    b.nccl(330, 50, launch_ts=310)
    calls, dropped = collective_calls(load_rank(b.write(tmp_path / "t.json")))
    assert dropped == 1
    assert [(c.size_bytes, c.group_size) for c in calls] == [(4000, 4)]   # 1000 floats * 4 B, P = 4


def test_impossible_call_is_not_saved_as_a_measurement(tmp_path):
    from conftest import run_commcost

    b = TraceBuilder(world_size=2)
    for k in range(3):   # three good sizes, 1,000 to 100,000 floats, and one negative
        b.param_comms(1000 * k + 100, 20, nelems_in=1000 * 10**k)
        b.nccl(1000 * k + 130, 50 + 10 * k, launch_ts=1000 * k + 110)
    b.param_comms(5000, 20, nelems_in=-1_048_576)
    b.nccl(5030, 50, launch_ts=5010)
    out = tmp_path / "m.csv"
    r = run_commcost("trace", str(b.write(tmp_path / "t.json")), "--save-measurement", str(out))
    assert r.returncode == 0, r.stderr
    assert "-4.19" not in r.stdout and "1 recorded call(s) left out" in r.stdout
    import csv

    rows = list(csv.DictReader(line for line in out.open() if not line.startswith("#")))
    assert sorted(int(r["size_bytes"]) for r in rows) == [4000, 40000, 400000]   # 10**k * 1000 floats * 4 B
