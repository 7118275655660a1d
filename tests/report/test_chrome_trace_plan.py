"""Direct test of ``report/chrome_trace.plan_chrome_trace``: a plan's accounting laid out as a Chrome trace,
in-process: the drawn spans add up to plan's terms, strict JSON, refused names."""

from __future__ import annotations

import pytest

from commcost.analyses.plan.plan import PlanInputs, plan
from commcost.comm.link import Link
from commcost.comm.model import FlatLinkModel
from commcost.core.errors import InputError
from commcost.parallel.layout import Layout
from commcost.report.chrome_trace import COMM_STREAM, COMPUTE_STREAM, plan_chrome_trace, write_trace
from commcost.workload.transformer import model_spec
from conftest import strict_json, strict_round_trip

P = plan(PlanInputs(spec=model_spec("gpt2-small"), layout=Layout(dp=8, tp=1, pp=1, global_batch=64), seq=1024,
                    gpu="h100-sxm", gpus_per_node=8),
         FlatLinkModel(link=Link(bandwidth_bytes_per_s=100e9, latency_s=10e-6)))


def _kernels(trace, stream):
    return [e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e["tid"] == stream]


def test_spans_add_up_to_the_plan():
    trace = strict_round_trip(plan_chrome_trace(P))
    compute = _kernels(trace, COMPUTE_STREAM)
    comm = _kernels(trace, COMM_STREAM)  # one dimension (dp): one communication stream
    # the compute stream: [0, C) then the optimizer after the exposed part; times in microseconds
    assert compute[0]["ts"] == 0 and compute[0]["dur"] == pytest.approx(P.compute_s * 1e6)
    assert compute[-1]["name"] == "optimizer" and compute[-1]["dur"] == pytest.approx(P.optimizer_s * 1e6)
    (line,) = P.comm
    hidden = [e for e in comm if e["name"].endswith(" hidden")]
    exposed = [e for e in comm if e["name"].endswith(" exposed")]
    # hidden time - exposed inside [0, C); exposed after C + bubble, then the optimizer: step = C + E + t_opt
    assert sum(e["dur"] for e in hidden) == pytest.approx((line.time_s - line.exposed_s) * 1e6)
    assert sum(e["dur"] for e in exposed) == pytest.approx(P.exposed_comm_s * 1e6)
    assert exposed[0]["ts"] == pytest.approx((P.compute_s + P.pipeline_bubble_s) * 1e6)
    assert compute[-1]["ts"] + compute[-1]["dur"] == pytest.approx(P.step_s * 1e6)
    assert trace["commcost"]["step_s"] == P.step_s and trace["distributedInfo"]["world_size"] == 8
    # each kernel has its launch, paired by correlation
    launches = {e["args"]["correlation"] for e in trace["traceEvents"] if e.get("name") == "cudaLaunchKernel"}
    assert {e["args"]["correlation"] for e in compute + comm} == launches


def test_written_trace_is_strict_json(tmp_path):
    path = tmp_path / "plan.json"
    write_trace(path, plan_chrome_trace(P))
    assert strict_json(path.read_text())["traceName"] == "commcost plan (accounting, one GPU)"
    with pytest.raises(InputError, match="must end in .json"):
        write_trace(tmp_path / "plan.txt", plan_chrome_trace(P))
    bad = plan_chrome_trace(P)
    bad["commcost"]["step_s"] = float("inf")
    with pytest.raises(InputError, match="not a finite number"):
        write_trace(tmp_path / "bad.json", bad)
    assert not (tmp_path / "bad.json").exists()
