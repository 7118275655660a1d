"""Direct tests of ``trace/summary.py``: a hand-made two-rank trace summarized, its collective priced by a
model, the median error, and the refusals (one file per rank)."""

from __future__ import annotations

import pytest

from commcost.comm.link import Link
from commcost.comm.model import FlatLinkModel
from commcost.core.errors import InputError
from commcost.core.units import US
from commcost.trace.summary import analyze_trace, median_abs_error, predict_rows, trace_measurement

from _kineto import TraceBuilder


def _two_ranks(d, comm_us=(100, 100)):
    for rank, dur in zip((0, 1), comm_us):
        b = TraceBuilder(rank=rank)
        b.step(1, 0, 300)
        b.compute(0, 150)
        b.param_comms(100, 1, nelems_in=262_144)   # 262,144 float32 = 1,048,576 B on 2 ranks
        b.nccl(100, dur)
        b.write(d / f"rank{rank}.json")
    return d


def test_summary_of_two_ranks(tmp_path):
    s = analyze_trace(_two_ranks(tmp_path))
    assert [r.rank for r in s.ranks] == [0, 1] and s.backend == "nccl" and s.world_size == 2
    (row,) = s.rows
    assert (row.op.value, row.size_bytes, row.group_size) == ("all_reduce", 1_048_576, 2)
    assert row.time_s == pytest.approx(100 * US) and not s.failed


def test_prediction_and_error_by_hand(tmp_path):
    s = analyze_trace(_two_ranks(tmp_path))
    # ring, P = 2, a = 5 us, B = 10 GB/s: 2(P-1)a + 2(P-1)/P S/B = 10 us + 104.86 us = 114.86 us
    (p,) = predict_rows(s.rows, FlatLinkModel(link=Link(bandwidth_bytes_per_s=10e9, latency_s=5e-6)),
                        algorithm="ring")
    assert p.predicted_s == pytest.approx(10e-6 + 1_048_576 / 10e9) and p.algorithm == "ring"
    assert p.measured == "kernel" and p.measured_s == pytest.approx(100 * US)
    # e = (114.86 - 100) / 100 = 0.1486
    assert p.error == pytest.approx((10e-6 + 1_048_576 / 10e9 - 100e-6) / 100e-6)
    assert median_abs_error([p]) == pytest.approx(abs(p.error))


def test_median_of_no_priced_row_is_none():
    assert median_abs_error([]) is None


def test_the_same_rank_twice_is_refused(tmp_path):
    for name in ("a.json", "b.json"):
        b = TraceBuilder(rank=0)
        b.compute(0, 10)
        b.write(tmp_path / name)
    with pytest.raises(InputError, match="rank 0 again"):
        analyze_trace(tmp_path)


def test_trace_measurement_by_hand(tmp_path):
    m = trace_measurement(analyze_trace(_two_ranks(tmp_path)))
    (row,) = m.rows
    # 262,144 float32 ("Float", as the profiler names it) = 1,048,576 B; count = 1,048,576 / 4 B = 262,144
    # elements; 100 us on both ranks
    assert (row.op, row.gpus, row.size_bytes, row.count, row.dtype) == ("all_reduce", 2, 1_048_576, 262_144, "Float")
    assert row.time_s == pytest.approx(100 * US)
    assert m.provenance["source_kind"] == "kineto-trace" and m.provenance["ranks"] == 2


def test_trace_measurement_without_a_collective_is_refused(tmp_path):
    b = TraceBuilder(rank=0)
    b.compute(0, 10)
    b.write(tmp_path / "rank0.json")
    with pytest.raises(InputError, match="no collective on 2 or more ranks"):
        trace_measurement(analyze_trace(tmp_path))
