"""Chrome trace out of ``commcost timeline``, read back by ``commcost trace``: the same exposed time."""

from __future__ import annotations

import json

import pytest

from commcost.report.chrome_trace import COMM_STREAM, COMPUTE_STREAM, timeline_chrome_trace
from commcost.step.ddp_buckets import ddp_bucket_caps
from commcost.step.timeline import TimelineInputs, simulate_timeline
from commcost.comm.model import FlatLinkModel
from commcost.comm.topology import Link
from commcost.trace.summary import analyze_trace

from conftest import run_commcost


@pytest.mark.parametrize("flags", [
    ["--gpus", "8", "--bw", "50", "--latency", "10", "--step-ms", "100", "--params", "1", "--optimizer-ms", "5"],
    ["--gpus", "64", "--bw", "25", "--latency", "20", "--step-ms", "300", "--model", "gpt3-1.3b"],
    ["--gpus", "16", "--bw", "400", "--latency", "5", "--step-ms", "50", "--params", "0.2", "--grad-accum", "3",
     "--bucket", "auto"],
    ["--system", "dgx-h100", "--nodes", "2", "--step-ms", "80", "--params", "2"],
])
def test_round_trip_exposed_time(tmp_path, flags):
    out = tmp_path / "sim.json"
    r = run_commcost("timeline", *flags, "--json", "--trace-out", str(out))
    assert r.returncode == 0, r.stderr
    sim = json.loads(r.stdout)
    exposed = sim["best"]["exposed_s"] if "best" in sim else sim["exposed_s"]
    back = json.loads(run_commcost("trace", str(out), "--json").stdout)
    # JSON keeps microseconds as floats: equal to rounding
    assert back["ranks"][0]["exposed_communication_s"] == pytest.approx(exposed, rel=1e-9, abs=1e-12)
    if "best" not in sim:
        # one stream: |U(comm)| = T_w, so HTA's overlap share is the timeline's (T_w - E) / T_w
        assert back["ranks"][0]["communication_s"] == pytest.approx(sim["wire_s"], rel=1e-9)
        assert back["ranks"][0]["overlap_pct"] == pytest.approx(100 * sim["overlap_fraction"], abs=1e-6)


def test_events_shape_and_bucket_args():
    inp = TimelineInputs(gpus=4, comm=FlatLinkModel(link=Link(bandwidth_bytes_per_s=10e9, latency_s=10e-6)), step_s=0.1,
                         params=10e6, bytes_per_grad=2, grad_accum=2, optimizer_s=0.002)
    tl = simulate_timeline(inp, ddp_bucket_caps(None))
    obj = timeline_chrome_trace(tl, inp)
    ev = obj["traceEvents"]
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    comm = [e for e in kernels if e["tid"] == COMM_STREAM]
    comp = [e for e in kernels if e["tid"] == COMPUTE_STREAM]
    assert len(comm) == len(tl.buckets)
    assert [e["args"]["size_bytes"] for e in comm] == [b.size_bytes for b in tl.buckets]
    assert len(comp) == 2 * 2 + 1                      # forward + backward per micro-batch, then the optimizer
    # S = 10e6 * 2 B = 20 MB; default caps 1 MiB then 25 MiB: buckets 1,048,576 B and the remaining 18,951,424 B
    assert [b.size_bytes for b in tl.buckets] == [1_048_576, 20e6 - 1_048_576]
    assert all(e["ph"] in ("X", "M") for e in ev)
    json.dumps(obj, allow_nan=False)


def test_library_round_trip_collectives(tmp_path):
    inp = TimelineInputs(gpus=8, comm=FlatLinkModel(link=Link(bandwidth_bytes_per_s=50e9, latency_s=10e-6)), step_s=0.05,
                         params=50e6, bytes_per_grad=2)
    tl = simulate_timeline(inp, ddp_bucket_caps(None))
    p = tmp_path / "t.json"
    p.write_text(json.dumps(timeline_chrome_trace(tl, inp)))
    s = analyze_trace(p)
    assert s.ranks[0].total.exposed_communication_s == pytest.approx(tl.exposed_s, abs=1e-12)
    assert s.ranks[0].total.communication_s == pytest.approx(tl.wire_s, rel=1e-9)  # one stream, no overlap
    assert sum(r.count for r in s.rows) == len(tl.buckets)
    assert all(r.group_size == 8 and r.dtype == "BFloat16" for r in s.rows)
    # the same flat link prices the buckets it simulated: ring 2(P-1)a + 2(P-1)/P S/B on both sides
    from commcost.trace.summary import median_abs_error, predict_rows

    preds = predict_rows(s.rows, inp.comm)
    assert median_abs_error(preds) == pytest.approx(0.0, abs=1e-9)


def test_trace_out_bad_name(tmp_path):
    r = run_commcost("timeline", "--gpus", "8", "--bw", "50", "--latency", "10", "--step-ms", "100", "--params", "1",
                     "--trace-out", str(tmp_path / "x.png"))
    assert r.returncode == 2 and "must end in .json" in r.stderr and "Traceback" not in r.stderr
