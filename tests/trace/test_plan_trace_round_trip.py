"""``plan --trace-out`` writes the step's accounting; ``commcost trace`` reads back plan's numbers."""

from __future__ import annotations

import json

import pytest

from conftest import run_commcost

PLAN = ("plan", "--model", "llama3-70b", "--system", "dgx-h100", "--gpus", "1024", "--seq", "8192",
        "--global-batch", "1024", "--tp", "8", "--pp", "4", "--vp", "5", "--zero", "1", "--sequence-parallel",
        "--recompute", "selective")


def test_plan_trace_reads_back_plans_exposed_communication_idle_and_step(tmp_path):
    out = tmp_path / "plan.json"
    r = run_commcost(*PLAN, "--trace-out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)
    t = run_commcost("trace", str(out), "--json")
    assert t.returncode == 0, t.stderr
    rank = json.loads(t.stdout)["ranks"][0]
    b = p["breakdown"]
    # exposed communication = the comm kernels with no compute under them = plan's exposed_comm_s
    assert rank["exposed_communication_s"] == pytest.approx(b["exposed_comm_s"], rel=1e-9)
    # idle = the pipeline bubble; compute = compute + optimizer; the step spans plan's step_s
    # idle: the bubble and the losses that grow with the job (commcost.step.losses), drawn as waiting
    assert rank["idle_s"] == pytest.approx(b["pipeline_bubble_s"] + b["losses"]["total_s"], rel=1e-9)
    assert rank["compute_s"] == pytest.approx(b["compute_s"] + b["optimizer_s"], rel=1e-9)
    assert rank["span_s"] == pytest.approx(p["step_s"], rel=1e-9)
    # every dimension's wire time is drawn: hidden + exposed = plan's time per step
    assert rank["communication_s"] == pytest.approx(sum(c["time_s"] for c in p["comm"]), rel=1e-9)


def test_plan_trace_out_needs_a_json_name(tmp_path):
    r = run_commcost(*PLAN, "--trace-out", str(tmp_path / "plan.txt"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and ".json" in r.stderr
