"""The budget report's simulated overlap: the "exposed" column and the (c)/(d) statements."""

import json

import pytest

from commcost.comm.model import FlatLinkModel
from commcost.analyses.drill.budget import MAX_SIMULATED_BUCKETS, BudgetInputs, communication_budget
from commcost.comm.topology import Link

from conftest import run_commcost, run_tool

NVLINK = FlatLinkModel(link=Link(bandwidth_bytes_per_s=300e9, latency_s=20e-6))  # fix (e)3: the drill's node link
DRILL = ("--gpus", "32", "--bw", "25", "--latency", "20", "--params", "1.3", "--step-ms", "400")


def _budget(bw_bytes_per_s, caps, gpus=2):
    # P = 2, a = 1 ms: T(c) = 2 ms + c/B; N = 50e6 bf16 -> S = 100e6 B; W = 2/3 * 0.3 s = 0.2 s
    return communication_budget(BudgetInputs(
        gpus=gpus, comm=FlatLinkModel(link=Link(bandwidth_bytes_per_s=bw_bytes_per_s, latency_s=1e-3)), params=50e6,
        step_s=0.3, bucket_caps_bytes=caps, intra_node_comm=NVLINK))


def test_exposed_column_keeps_up_and_saturates_by_hand():
    # 10e6 B buckets fill in 0.02 s. B = 1e9: T = 0.012 s keeps up -> exposed = last bucket's 0.012 s.
    # B = 0.25e9: T = 0.042 s saturates -> exposed = 10 * 0.042 - 0.2 + 0.02 = 0.24 s.
    assert _budget(1e9, (10e6,)).overlap.exposed_by_cap_s == (pytest.approx(0.012),)
    assert _budget(0.25e9, (10e6,)).overlap.exposed_by_cap_s == (pytest.approx(0.24),)


def test_one_gpu_exposes_nothing():
    ov = _budget(1e9, (10e6, 1e6), gpus=1).overlap
    assert ov.exposed_by_cap_s == (0.0, 0.0)
    assert ov.default.exposed_s == 0.0 and ov.best.exposed_s == 0.0


def test_too_many_buckets_are_not_simulated():
    # a 1-byte cap on a 100e6 B gradient is 1e8 buckets > MAX_SIMULATED_BUCKETS
    assert 100e6 > MAX_SIMULATED_BUCKETS
    assert _budget(1e9, (1.0, 10e6)).overlap.exposed_by_cap_s == (None, pytest.approx(0.012))


def test_best_bucket_exposes_no_more_than_the_default_and_both_within_wire_time():
    b = communication_budget(BudgetInputs(gpus=32, comm=FlatLinkModel(link=Link(bandwidth_bytes_per_s=25e9, latency_s=20e-6)),
                                          params=1.3e9, step_s=0.4, intra_node_comm=NVLINK))
    d, best = b.overlap.default, b.overlap.best
    assert 0 < best.exposed_s <= d.exposed_s <= d.wire_s
    assert best.step_s <= d.step_s
    assert d.bucket_cap_bytes == 25 * 2**20 and d.first_bucket_cap_bytes == 2**20


def test_drill_report_has_the_exposed_column_and_the_statements():
    r = run_tool(*DRILL, "--buckets", "1,8,16,25,100")
    assert r.returncode == 0, r.stderr
    header = next(line for line in r.stdout.splitlines() if "lat%" in line)      # (f) in 80 columns
    assert header.rstrip().endswith("exposed")
    rows = [line for line in r.stdout.splitlines() if line.strip().endswith(("s", "ms")) and " MiB " in line
            and line.split()[1] == "MiB" and line.split()[0] in ("1", "8", "16", "25", "100")]
    assert len(rows) == 5
    assert "PyTorch's 25 MiB default (first bucket 1 MiB)" in r.stdout   # part (c)
    assert "-> Simulated: with the 25 MiB default" in r.stdout           # part (d)


def test_budget_json_agrees_with_the_timeline_command():
    r = run_tool(*DRILL, "--buckets", "1,8,16,25,100", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    sim = d["step"]["simulated"]
    assert len(d["buckets"]["exposed_s"]) == 5
    tl = run_commcost("timeline", *DRILL, "--json")
    assert tl.returncode == 0, tl.stderr
    t = json.loads(tl.stdout)
    assert sim["default_exposed_s"] == pytest.approx(t["exposed_s"])
    assert sim["default_wire_s"] == pytest.approx(t["wire_s"])
    auto = json.loads(run_commcost("timeline", *DRILL, "--bucket", "auto", "--json").stdout)
    assert sim["best_bucket_bytes"] == auto["best"]["bucket_bytes"]
    assert sim["best_exposed_s"] == pytest.approx(auto["best"]["exposed_s"])
    # the 25 MiB row (explicit bucket_cap_mb: first bucket 25 MiB) is the same as `timeline --bucket 25`
    t25 = json.loads(run_commcost("timeline", *DRILL, "--bucket", "25", "--json").stdout)
    assert d["buckets"]["exposed_s"][3] == pytest.approx(t25["exposed_s"])


def test_library_skips_the_simulation_past_the_bucket_limit():
    # 1e14 params * 2 B = 2e14 B; / 25 MiB = 7.6e6 buckets > 2**20: not simulated (was 30 s, 1.8 GB)
    b = communication_budget(BudgetInputs(gpus=32, comm=FlatLinkModel(link=Link(bandwidth_bytes_per_s=25e9, latency_s=20e-6)),
                                          params=1e14, step_s=0.4, intra_node_comm=NVLINK))
    assert b.overlap is None
    # the closed-form parts are still there: T = 1.24 ms + 62/32 * 2e14/25e9 s
    assert b.allreduce.total_s == pytest.approx(1.24e-3 + 62 / 32 * 2e14 / 25e9)
